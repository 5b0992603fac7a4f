// Runs every workspaces.*, guardrails.* and organization.listMembers method
// of the public @openrouter/sdk against the gateway; the SDK validates each
// response with its zod schemas, so a missing field or a wrong status fails
// here. apiKeys.getCurrentKeyMetadata with the admin's key follows its
// guardrails' allowedDataRegions. Driven by ../orgs_test.go.
//
//   TOLLGATE_BASE_URL=http://127.0.0.1:9480/api/v1 TOLLGATE_MGMT_KEY=... \
//   TOLLGATE_ADMIN_USER=user_... TOLLGATE_MEMBER_USER=user_... TOLLGATE_KEY_HASH=... \
//   TOLLGATE_KEY=... node orgs.mjs
import assert from "node:assert/strict";
import { client, done, expectError, requireEnv, step } from "./harness.mjs";

const [mgmtKey, adminUser, memberUser, keyHash, key] = requireEnv(
  "TOLLGATE_BASE_URL", "TOLLGATE_MGMT_KEY", "TOLLGATE_ADMIN_USER", "TOLLGATE_MEMBER_USER", "TOLLGATE_KEY_HASH", "TOLLGATE_KEY",
).slice(1);
const mgmt = client(mgmtKey);
const every = ["global", "europe", "us"];

// keyRegions checks the allowedDataRegions that GET /key reports for the
// admin's key (hash keyHash).
async function keyRegions(want, why) {
  const res = await client(key).apiKeys.getCurrentKeyMetadata();
  assert.deepEqual(res.data.allowedDataRegions, want, why);
}
const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const slug = `sdk-${Date.now()}`;
let ws, defaultWS, guardrail;

await step("organization.listMembers", async () => {
  const res = await mgmt.organization.listMembers({ limit: 10 });
  const data = res.result.data;
  assert.equal(res.result.totalCount, 2);
  const byId = Object.fromEntries(data.map((m) => [m.id, m]));
  assert.equal(byId[adminUser].role, "admin");
  assert.equal(byId[memberUser].role, "member");
  assert.equal(typeof byId[adminUser].email, "string");
  assert.equal(byId[memberUser].firstName, "Mia");
  const second = await mgmt.organization.listMembers({ offset: 1, limit: 1 });
  assert.equal(second.result.data.length, 1);
  assert.equal(second.result.data[0].id, data[1].id);
});

await step("workspaces.list (default workspace)", async () => {
  const res = await mgmt.workspaces.list();
  assert.equal(res.result.totalCount, 1);
  defaultWS = res.result.data[0];
  assert.equal(defaultWS.slug, "default");
  assert.match(defaultWS.id, uuid);
  assert.match(defaultWS.defaultGuardrailId, uuid);
});

await step("workspaces.create", async () => {
  const res = await mgmt.workspaces.create({
    createWorkspaceRequest: { name: "SDK Production", slug, description: "from the SDK", defaultTextModel: "tollgate-mock" },
  });
  ws = res.data;
  assert.match(ws.id, uuid);
  assert.equal(ws.slug, slug);
  assert.equal(ws.description, "from the SDK");
  assert.equal(ws.defaultTextModel, "tollgate-mock");
  assert.equal(ws.ioLoggingSamplingRate, 1);
  assert.equal(ws.updatedAt, null);
});

await step("workspaces.create duplicate slug is refused", async () => {
  const err = await expectError(() => mgmt.workspaces.create({ createWorkspaceRequest: { name: "again", slug } }));
  assert.equal(err.statusCode, 400);
});

await step("workspaces.get by id and by slug", async () => {
  const byId = await mgmt.workspaces.get({ id: ws.id });
  const bySlug = await mgmt.workspaces.get({ id: slug });
  assert.equal(byId.data.id, ws.id);
  assert.equal(bySlug.data.id, ws.id);
});

await step("workspaces.update", async () => {
  const res = await mgmt.workspaces.update({
    id: slug,
    updateWorkspaceRequest: { name: "SDK Prod", isObservabilityBroadcastEnabled: true, ioLoggingApiKeyIds: [1, 2] },
  });
  assert.equal(res.data.name, "SDK Prod");
  assert.equal(res.data.slug, slug);
  assert.equal(res.data.isObservabilityBroadcastEnabled, true);
  assert.deepEqual(res.data.ioLoggingApiKeyIds, [1, 2]);
  assert.ok(!Number.isNaN(Date.parse(res.data.updatedAt)));
});

await step("workspaces.bulkAddMembers inherits organization roles", async () => {
  const res = await mgmt.workspaces.bulkAddMembers({
    id: ws.id,
    bulkAddWorkspaceMembersRequest: { userIds: [adminUser, memberUser] },
  });
  assert.equal(res.addedCount, 2);
  const roles = Object.fromEntries(res.data.map((m) => [m.userId, m.role]));
  assert.deepEqual(roles, { [adminUser]: "admin", [memberUser]: "member" });
  for (const m of res.data) {
    assert.equal(m.workspaceId, ws.id);
    assert.match(m.id, uuid);
  }
});

await step("workspaces.listMembers", async () => {
  const res = await mgmt.workspaces.listMembers({ id: slug, limit: 50 });
  assert.equal(res.result.totalCount, 2);
  const def = await mgmt.workspaces.listMembers({ id: defaultWS.id });
  assert.equal(def.result.totalCount, 2, "the default workspace holds every member");
});

await step("workspaces.bulkRemoveMembers", async () => {
  const res = await mgmt.workspaces.bulkRemoveMembers({
    id: ws.id,
    bulkRemoveWorkspaceMembersRequest: { userIds: [memberUser] },
  });
  assert.equal(res.removedCount, 1);
  const left = await mgmt.workspaces.listMembers({ id: ws.id });
  assert.deepEqual(left.result.data.map((m) => m.userId), [adminUser]);
});

await step("workspaces.setBudget", async () => {
  const monthly = await mgmt.workspaces.setBudget({
    workspaceRef: slug, interval: "monthly", upsertWorkspaceBudgetRequest: { limitUsd: 100, includeByokInBudgets: true },
  });
  assert.equal(monthly.data.limitUsd, 100);
  assert.equal(monthly.data.resetInterval, "monthly");
  assert.equal(monthly.data.workspaceId, ws.id);
  assert.equal(monthly.includeByokInBudgets, true);
  const lifetime = await mgmt.workspaces.setBudget({
    workspaceRef: ws.id, interval: "lifetime", upsertWorkspaceBudgetRequest: { limitUsd: 500 },
  });
  assert.equal(lifetime.data.resetInterval, null);
  const updated = await mgmt.workspaces.setBudget({
    workspaceRef: ws.id, interval: "monthly", upsertWorkspaceBudgetRequest: { limitUsd: 150 },
  });
  assert.equal(updated.data.id, monthly.data.id, "PUT updates the interval's budget in place");
  assert.equal(updated.data.limitUsd, 150);
});

await step("workspaces.setBudget keeps limits decreasing as intervals narrow", async () => {
  const err = await expectError(() => mgmt.workspaces.setBudget({
    workspaceRef: ws.id, interval: "daily", upsertWorkspaceBudgetRequest: { limitUsd: 200 },
  }));
  assert.equal(err.statusCode, 400);
});

await step("workspaces.getBudget", async () => {
  const res = await mgmt.workspaces.getBudget({ workspaceRef: slug, interval: "monthly" });
  assert.equal(res.data.limitUsd, 150);
  assert.equal(res.includeByokInBudgets, true);
});

await step("workspaces.listBudgets", async () => {
  const res = await mgmt.workspaces.listBudgets({ workspaceRef: slug });
  assert.deepEqual(res.data.map((b) => b.resetInterval), ["monthly", null]);
});

await step("workspaces.deleteBudget", async () => {
  const res = await mgmt.workspaces.deleteBudget({ workspaceRef: slug, interval: "lifetime" });
  assert.equal(res.deleted, true);
  const err = await expectError(() => mgmt.workspaces.getBudget({ workspaceRef: slug, interval: "lifetime" }));
  assert.equal(err.statusCode, 404);
});

await step("guardrails.create", async () => {
  const res = await mgmt.guardrails.create({
    createGuardrailRequest: {
      name: "SDK guardrail",
      description: "made by the SDK",
      allowedModels: ["tollgate-mock"],
      allowedProviders: ["mock"],
      ignoredProviders: null,
      limitUsd: 50,
      resetInterval: "monthly",
      enforceZdrOpenai: true,
      enableFreeModelTraining: false,
      allowedDataRegions: ["global"],
      includeByokInBudgets: false,
    },
  });
  guardrail = res.data;
  assert.match(guardrail.id, uuid);
  assert.equal(guardrail.workspaceId, defaultWS.id);
  assert.deepEqual(guardrail.allowedModels, ["tollgate-mock"]);
  assert.equal(guardrail.limitUsd, 50);
  assert.equal(guardrail.resetInterval, "monthly");
  assert.equal(guardrail.enforceZdrOpenai, true);
  assert.equal(guardrail.enableFreeModelTraining, false);
  assert.equal(guardrail.ignoredProviders, null);
  assert.equal(guardrail.updatedAt, null);
});

await step("guardrails.get", async () => {
  const res = await mgmt.guardrails.get({ id: guardrail.id });
  assert.equal(res.data.name, "SDK guardrail");
});

await step("guardrails.update", async () => {
  const res = await mgmt.guardrails.update({
    id: guardrail.id,
    updateGuardrailRequest: { name: "SDK guardrail v2", limitUsd: 75, resetInterval: "weekly", ignoredModels: ["other"] },
  });
  assert.equal(res.data.name, "SDK guardrail v2");
  assert.equal(res.data.limitUsd, 75);
  assert.equal(res.data.resetInterval, "weekly");
  assert.deepEqual(res.data.ignoredModels, ["other"]);
  assert.deepEqual(res.data.allowedModels, ["tollgate-mock"], "fields left out are kept");
});

await step("guardrails.update materializes a workspace default guardrail", async () => {
  const missing = await expectError(() => mgmt.guardrails.get({ id: ws.defaultGuardrailId }));
  assert.equal(missing.statusCode, 404);
  const res = await mgmt.guardrails.update({ id: ws.defaultGuardrailId, updateGuardrailRequest: { enforceZdr: true } });
  assert.equal(res.data.id, ws.defaultGuardrailId);
  assert.equal(res.data.workspaceId, ws.id);
  assert.equal(res.data.enforceZdr, true);
});

await step("guardrails.list", async () => {
  const def = await mgmt.guardrails.list();
  assert.deepEqual(def.result.data.map((g) => g.id), [guardrail.id]);
  const other = await mgmt.guardrails.list({ workspaceId: ws.id, limit: 10 });
  assert.deepEqual(other.result.data.map((g) => g.id), [ws.defaultGuardrailId]);
  assert.equal(other.result.totalCount, 1);
});

await step("guardrails.bulkAssignKeys", async () => {
  await keyRegions(every, "no guardrail applies yet");
  const res = await mgmt.guardrails.bulkAssignKeys({ id: guardrail.id, bulkAssignKeysRequest: { keyHashes: [keyHash] } });
  assert.equal(res.assignedCount, 1);
  await keyRegions(["global"], "the key's guardrail");
});

await step("guardrails.update content filters, applied to the key's chat.send", async () => {
  const res = await mgmt.guardrails.update({
    id: guardrail.id,
    updateGuardrailRequest: {
      contentFilters: [{ pattern: "\\bPROJ-[0-9]{4}\\b", action: "block", label: "project code" }],
      contentFilterBuiltins: [{ slug: "email", action: "redact" }],
    },
  });
  assert.equal(res.data.contentFilters[0].pattern, "\\bPROJ-[0-9]{4}\\b");
  assert.equal(res.data.contentFilters[0].label, "project code");
  assert.equal(res.data.contentFilterBuiltins[0].label, "[EMAIL]");
  const bad = await expectError(() => mgmt.guardrails.update({
    id: guardrail.id, updateGuardrailRequest: { contentFilters: [{ pattern: "(", action: "block" }] },
  }));
  assert.equal(bad.statusCode, 400);
  const chat = client(key).chat;
  const blocked = await expectError(() => chat.send({
    chatRequest: { model: "tollgate-mock", messages: [{ role: "user", content: "status of PROJ-1234" }] },
  }));
  assert.equal(blocked.statusCode, 403);
  // The mock echoes the last user message: the provider got it redacted.
  const ok = await chat.send({
    chatRequest: { model: "tollgate-mock", messages: [{ role: "user", content: "mail bob@example.com" }] },
  });
  assert.equal(ok.choices[0].message.content, "Mock answer from tollgate-mock: mail [EMAIL]");
  const off = await mgmt.guardrails.update({
    id: guardrail.id, updateGuardrailRequest: { contentFilters: null, contentFilterBuiltins: null },
  });
  assert.equal(off.data.contentFilters, null);
});

await step("guardrails.listGuardrailKeyAssignments", async () => {
  const res = await mgmt.guardrails.listGuardrailKeyAssignments({ id: guardrail.id });
  assert.equal(res.result.totalCount, 1);
  const a = res.result.data[0];
  assert.equal(a.keyHash, keyHash);
  assert.equal(a.guardrailId, guardrail.id);
  assert.equal(a.keyName, "sdk key");
  assert.equal(typeof a.keyLabel, "string");
  assert.equal(a.assignedBy, adminUser);
});

await step("guardrails.listKeyAssignments", async () => {
  const res = await mgmt.guardrails.listKeyAssignments({ limit: 100 });
  assert.deepEqual(res.result.data.map((a) => a.keyHash), [keyHash]);
});

await step("guardrails.bulkAssignMembers", async () => {
  const res = await mgmt.guardrails.bulkAssignMembers({
    id: guardrail.id, bulkAssignMembersRequest: { memberUserIds: [adminUser, memberUser] },
  });
  assert.equal(res.assignedCount, 2);
});

await step("guardrails.listGuardrailMemberAssignments", async () => {
  const res = await mgmt.guardrails.listGuardrailMemberAssignments({ id: guardrail.id, offset: 0, limit: 1 });
  assert.equal(res.result.totalCount, 2);
  assert.equal(res.result.data.length, 1);
  assert.equal(typeof res.result.data[0].organizationId, "string");
});

await step("guardrails.listMemberAssignments", async () => {
  const res = await mgmt.guardrails.listMemberAssignments();
  assert.deepEqual(res.result.data.map((a) => a.userId).sort(), [adminUser, memberUser].sort());
});

await step("guardrails.bulkUnassignMembers", async () => {
  const res = await mgmt.guardrails.bulkUnassignMembers({
    id: guardrail.id, bulkUnassignMembersRequest: { memberUserIds: [memberUser, "user_nobody"] },
  });
  assert.equal(res.unassignedCount, 1);
});

await step("guardrails.bulkUnassignKeys", async () => {
  const res = await mgmt.guardrails.bulkUnassignKeys({ id: guardrail.id, bulkUnassignKeysRequest: { keyHashes: [keyHash] } });
  assert.equal(res.unassignedCount, 1);
  const left = await mgmt.guardrails.listKeyAssignments();
  assert.equal(left.result.totalCount, 0);
  await keyRegions(["global"], "still assigned to the key's member (its creator)");
});

await step("guardrails.delete", async () => {
  const res = await mgmt.guardrails.delete({ id: guardrail.id });
  assert.equal(res.deleted, true);
  const err = await expectError(() => mgmt.guardrails.get({ id: guardrail.id }));
  assert.equal(err.statusCode, 404);
  await keyRegions(every, "the guardrail is gone");
});

await step("workspaces.delete refuses the default workspace", async () => {
  const err = await expectError(() => mgmt.workspaces.delete({ id: defaultWS.id }));
  assert.equal(err.statusCode, 403);
});

await step("workspaces.delete", async () => {
  const res = await mgmt.workspaces.delete({ id: slug });
  assert.equal(res.deleted, true);
  const err = await expectError(() => mgmt.workspaces.get({ id: ws.id }));
  assert.equal(err.statusCode, 404);
  const list = await mgmt.workspaces.list();
  assert.equal(list.result.totalCount, 1);
});

done();

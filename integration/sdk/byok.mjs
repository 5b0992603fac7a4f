// Runs every byok.* method of the public @openrouter/sdk against the
// gateway; the SDK validates each response with its zod schemas, so a field
// of the wrong type or a missing one fails here. Driven by ../byok_test.go.
//
//   TOLLGATE_BASE_URL=http://127.0.0.1:9480/api/v1 TOLLGATE_MGMT_KEY=... \
//   TOLLGATE_API_KEY=... TOLLGATE_KEY_HASH=... \
//   TOLLGATE_DEFAULT_WORKSPACE_ID=... TOLLGATE_WORKSPACE_ID=... node byok.mjs
//
// TOLLGATE_WORKSPACE_ID is a second workspace of the account (slug
// "research"), holding no credential at the start.
import assert from "node:assert/strict";
import { client, done, expectError, requireEnv, step } from "./harness.mjs";
import * as errors from "@openrouter/sdk/models/errors";

const [mgmtKey, apiKey, keyHash, defaultWS, workspaceID] = requireEnv("TOLLGATE_BASE_URL", "TOLLGATE_MGMT_KEY",
  "TOLLGATE_API_KEY", "TOLLGATE_KEY_HASH", "TOLLGATE_DEFAULT_WORKSPACE_ID", "TOLLGATE_WORKSPACE_ID").slice(1);
const mgmt = client(mgmtKey);
const regular = client(apiKey);

const secret = "sk-sdk-own-mock-key-0123456789";
const rotated = "sk-sdk-rotated-mock-key-ABCDEFGH";
const noSecret = (v) => {
  const s = JSON.stringify(v);
  assert.equal(s.includes(secret) || s.includes(rotated), false, "response leaks the provider key");
};
let id, id2;

await step("byok.list empty", async () => {
  const res = await mgmt.byok.list();
  assert.deepEqual(res.result.data, []);
  assert.equal(res.result.totalCount, 0);
});

await step("byok.create", async () => {
  const res = await mgmt.byok.create({
    createBYOKKeyRequest: { provider: "mock", key: secret, name: "SDK mock key" },
  });
  noSecret(res);
  const d = res.data;
  id = d.id;
  assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(d.provider, "mock");
  assert.equal(d.name, "SDK mock key");
  assert.equal(d.label, "sk-...6789");
  assert.equal(d.disabled, false);
  assert.equal(d.isFallback, false);
  assert.equal(d.isByokOnly, false);
  assert.equal(d.isRequired, false);
  assert.equal(d.declaredZdr, null);
  assert.equal(d.allowedModels, null);
  assert.equal(d.allowedApiKeyHashes, null);
  assert.equal(d.allowedUserIds, null);
  assert.equal(d.sortOrder, 0);
  assert.equal(d.workspaceId, defaultWS);
  assert.ok(!Number.isNaN(Date.parse(d.createdAt)), "createdAt parses");
});

await step("byok.create with every field", async () => {
  const res = await mgmt.byok.create({
    createBYOKKeyRequest: {
      provider: "mock",
      key: "second-sdk-key-xyz",
      name: null,
      disabled: true,
      isFallback: true,
      isByokOnly: true,
      isRequired: true,
      declaredZdr: false,
      allowedModels: ["tollgate-mock"],
      allowedApiKeyHashes: [keyHash],
      allowedUserIds: ["user-1"],
    },
  });
  const d = res.data;
  id2 = d.id;
  assert.equal(d.name, null);
  assert.equal(d.disabled, true);
  assert.equal(d.isFallback, true);
  assert.equal(d.isByokOnly, true);
  assert.equal(d.isRequired, true);
  assert.equal(d.declaredZdr, false);
  assert.deepEqual(d.allowedModels, ["tollgate-mock"]);
  assert.deepEqual(d.allowedApiKeyHashes, [keyHash]);
  assert.deepEqual(d.allowedUserIds, ["user-1"]);
  assert.equal(d.sortOrder, 1);
});

await step("byok.create unknown provider is 400", async () => {
  const err = await expectError(() =>
    mgmt.byok.create({ createBYOKKeyRequest: { provider: "openai", key: "k" } }));
  assert.ok(err instanceof errors.BadRequestResponseError, `got ${err?.name}`);
  assert.equal(err.statusCode, 400);
  assert.match(err.message, /provider/);
  assert.match(err.message, /mock/);
});

await step("byok.get", async () => {
  const res = await mgmt.byok.get({ id });
  noSecret(res);
  assert.equal(res.data.id, id);
  assert.equal(res.data.label, "sk-...6789");
});

await step("byok.list", async () => {
  const res = await mgmt.byok.list({ provider: "mock" });
  noSecret(res);
  assert.equal(res.result.totalCount, 2);
  assert.deepEqual(res.result.data.map((c) => c.id), [id2, id]);
});

await step("byok.list pages", async () => {
  const seen = [];
  for await (const page of await mgmt.byok.list({ limit: 1 })) {
    assert.equal(page.result.totalCount, 2);
    seen.push(...page.result.data.map((c) => c.id));
  }
  assert.deepEqual(seen, [id2, id]);
});

let wsCred;
await step("byok.create in another workspace", async () => {
  const res = await mgmt.byok.create({
    createBYOKKeyRequest: { provider: "mock", key: "research-sdk-key-0001", workspaceId: workspaceID },
  });
  wsCred = res.data.id;
  assert.equal(res.data.workspaceId, workspaceID);
  // sort_order counts within the workspace
  assert.equal(res.data.sortOrder, 0);
  assert.equal(res.data.label, "res...0001");
});

await step("byok.create by workspace slug", async () => {
  const res = await mgmt.byok.create({
    createBYOKKeyRequest: { provider: "mock", key: "research-sdk-key-0002", workspaceId: "research" },
  });
  assert.equal(res.data.workspaceId, workspaceID);
  assert.equal(res.data.sortOrder, 1);
  assert.equal((await mgmt.byok.delete({ id: res.data.id })).deleted, true);
});

await step("byok.list per workspace", async () => {
  const ws = await mgmt.byok.list({ workspaceId: workspaceID });
  assert.equal(ws.result.totalCount, 1);
  assert.deepEqual(ws.result.data.map((c) => [c.id, c.workspaceId]), [[wsCred, workspaceID]]);
  const def = await mgmt.byok.list();
  assert.deepEqual(def.result.data.map((c) => c.id), [id2, id]);
  const explicit = await mgmt.byok.list({ workspaceId: defaultWS });
  assert.deepEqual(explicit.result.data.map((c) => c.id), [id2, id]);
  assert.ok(explicit.result.data.every((c) => c.workspaceId === defaultWS));
});

await step("byok.get in another workspace", async () => {
  const res = await mgmt.byok.get({ id: wsCred });
  assert.equal(res.data.workspaceId, workspaceID);
});

await step("byok unknown workspace is 400", async () => {
  const unknown = "00000000-0000-4000-8000-000000000000";
  let err = await expectError(() =>
    mgmt.byok.create({ createBYOKKeyRequest: { provider: "mock", key: "k-unknown-ws", workspaceId: unknown } }));
  assert.ok(err instanceof errors.BadRequestResponseError, `got ${err?.name}`);
  assert.match(err.message, /workspace_id/);
  err = await expectError(() => mgmt.byok.list({ workspaceId: unknown }));
  assert.ok(err instanceof errors.BadRequestResponseError, `got ${err?.name}`);
  assert.match(err.message, /workspace_id/);
});

await step("byok.update", async () => {
  const res = await mgmt.byok.update({
    id,
    updateBYOKKeyRequest: { name: "renamed", key: rotated, isFallback: true, declaredZdr: true },
  });
  noSecret(res);
  assert.equal(res.data.id, id);
  assert.equal(res.data.name, "renamed");
  assert.equal(res.data.label, "sk-...EFGH");
  assert.equal(res.data.isFallback, true);
  assert.equal(res.data.declaredZdr, true);
});

await step("byok.update clears an allowlist", async () => {
  const res = await mgmt.byok.update({ id: id2, updateBYOKKeyRequest: { allowedApiKeyHashes: null, disabled: false } });
  assert.equal(res.data.allowedApiKeyHashes, null);
  assert.equal(res.data.disabled, false);
});

await step("byok.list with a regular key is 403", async () => {
  const err = await expectError(() => regular.byok.list());
  assert.equal(err.statusCode, 403);
});

await step("byok.delete", async () => {
  const res = await mgmt.byok.delete({ id: id2 });
  assert.equal(res.deleted, true);
});

await step("byok.get deleted is 404", async () => {
  const err = await expectError(() => mgmt.byok.get({ id: id2 }));
  assert.ok(err instanceof errors.NotFoundResponseError, `got ${err?.name}`);
  assert.equal(err.statusCode, 404);
});

await step("byok.delete deleted is 404", async () => {
  const err = await expectError(() => mgmt.byok.delete({ id: id2 }));
  assert.equal(err.statusCode, 404);
});

await step("byok.update unknown is 404", async () => {
  const err = await expectError(() => mgmt.byok.update({ id: id2, updateBYOKKeyRequest: { name: "x" } }));
  assert.equal(err.statusCode, 404);
});

done();

// Runs every scim.* method of the public @openrouter/sdk against the
// gateway; the SDK validates each response with its zod schemas, so a
// missing field or a wrong status fails here. Driven by ../scim_test.go,
// which has pushed a user and the group "Engineering" (with that user)
// over the SCIM 2.0 service and created a workspace.
//
//   TOLLGATE_BASE_URL=http://127.0.0.1:9480/api/v1 TOLLGATE_MGMT_KEY=... \
//   TOLLGATE_WORKSPACE=<uuid> TOLLGATE_SCIM_USER=user_... node scim.mjs
import assert from "node:assert/strict";
import { client, done, expectError, requireEnv, step } from "./harness.mjs";

const [mgmtKey, workspace, scimUser] = requireEnv(
  "TOLLGATE_BASE_URL", "TOLLGATE_MGMT_KEY", "TOLLGATE_WORKSPACE", "TOLLGATE_SCIM_USER",
).slice(1);
const mgmt = client(mgmtKey);
const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
let group, mapping;

await step("scim.listGroups", async () => {
  const res = await mgmt.scim.listGroups({ limit: 10 });
  assert.equal(res.result.totalCount, 1);
  group = res.result.data[0];
  assert.match(group.id, uuid);
  assert.equal(group.displayName, "Engineering");
  assert.equal(group.externalId, null);
  assert.equal(typeof group.organizationId, "string");
  const empty = await mgmt.scim.listGroups({ offset: 1, limit: 10 });
  assert.equal(empty.result.data.length, 0);
  assert.equal(empty.result.totalCount, 1);
});

await step("scim.listMappings (none yet)", async () => {
  const res = await mgmt.scim.listMappings();
  assert.equal(res.result.totalCount, 0);
  assert.deepEqual(res.result.data, []);
});

await step("scim.create", async () => {
  const res = await mgmt.scim.create({
    createScimGroupMappingRequest: { scimGroupId: group.id, workspaceId: workspace, role: "member" },
  });
  mapping = res.data;
  assert.match(mapping.id, uuid);
  assert.equal(mapping.scimGroupId, group.id);
  assert.equal(mapping.workspaceId, workspace);
  assert.equal(mapping.role, "member");
  assert.equal(mapping.organizationId, group.organizationId);
  // The mapping applied at once: the group's member is in the workspace.
  const members = await mgmt.workspaces.listMembers({ id: workspace });
  assert.deepEqual(members.result.data.map((m) => [m.userId, m.role]), [[scimUser, "member"]]);
});

await step("scim.create again (same role) returns the mapping; another role is 409", async () => {
  const res = await mgmt.scim.create({
    createScimGroupMappingRequest: { scimGroupId: group.id, workspaceId: workspace, role: "member" },
  });
  assert.equal(res.data.id, mapping.id);
  const err = await expectError(() => mgmt.scim.create({
    createScimGroupMappingRequest: { scimGroupId: group.id, workspaceId: workspace, role: "admin" },
  }));
  assert.equal(err.statusCode, 409);
});

await step("scim.create with an unknown group is 404", async () => {
  const err = await expectError(() => mgmt.scim.create({
    createScimGroupMappingRequest: { scimGroupId: "00000000-0000-4000-8000-000000000000", workspaceId: workspace, role: "member" },
  }));
  assert.equal(err.statusCode, 404);
});

await step("scim.read", async () => {
  const res = await mgmt.scim.read({ id: mapping.id });
  assert.deepEqual(res.data, mapping);
  const err = await expectError(() => mgmt.scim.read({ id: "00000000-0000-4000-8000-000000000000" }));
  assert.equal(err.statusCode, 404);
});

await step("scim.update", async () => {
  const res = await mgmt.scim.update({ id: mapping.id, updateScimGroupMappingRequest: { role: "admin" } });
  assert.equal(res.data.id, mapping.id);
  assert.equal(res.data.role, "admin");
  mapping = res.data;
});

await step("scim.listMappings", async () => {
  const res = await mgmt.scim.listMappings({ limit: 5 });
  assert.equal(res.result.totalCount, 1);
  assert.equal(res.result.data[0].id, mapping.id);
  assert.equal(res.result.data[0].role, "admin");
});

await step("scim.createSyncJob and scim.getSyncJob", async () => {
  const res = await mgmt.scim.createSyncJob();
  const job = res.result.data;
  assert.ok(["queued", "running", "succeeded"].includes(job.status), job.status);
  assert.equal(typeof job.createdAt, "string");
  let got;
  for (let i = 0; i < 200; i++) {
    got = (await mgmt.scim.getSyncJob({ id: job.id })).data;
    if (got.status === "succeeded" || got.status === "failed") break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(got.status, "succeeded");
  assert.equal(got.id, job.id);
  assert.equal(got.syncedGroups, 1);
  assert.equal(got.deletedGroups, 0);
  assert.equal(got.errorMessage, null);
  assert.equal(typeof got.startedAt, "string");
  assert.equal(typeof got.finishedAt, "string");
  // The role change reached the membership the mapping granted.
  const members = await mgmt.workspaces.listMembers({ id: workspace });
  assert.deepEqual(members.result.data.map((m) => [m.userId, m.role]), [[scimUser, "admin"]]);
  const err = await expectError(() => mgmt.scim.getSyncJob({ id: "00000000-0000-4000-8000-000000000000" }));
  assert.equal(err.statusCode, 404);
});

await step("scim.delete needs keep_members; false removes the granted members", async () => {
  const res = await mgmt.scim.delete({ id: mapping.id, keepMembers: false });
  assert.equal(res.deleted, true);
  const members = await mgmt.workspaces.listMembers({ id: workspace });
  assert.equal(members.result.totalCount, 0);
  const err = await expectError(() => mgmt.scim.delete({ id: mapping.id, keepMembers: true }));
  assert.equal(err.statusCode, 404);
});

done();

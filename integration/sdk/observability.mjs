// Runs every observability.* method of the public @openrouter/sdk against
// the gateway; the SDK validates each response with its zod schemas (a
// discriminated union on `type`), so a missing or mistyped field fails
// here. Driven by ../observability_test.go.
//
//   TOLLGATE_BASE_URL=http://127.0.0.1:9480/api/v1 TOLLGATE_MGMT_KEY=... \
//   TOLLGATE_API_KEY=... TOLLGATE_KEY_HASH=... TOLLGATE_HOOK_URL=... node observability.mjs
import assert from "node:assert/strict";
import { client, done, expectError, requireEnv, step } from "./harness.mjs";
import * as errors from "@openrouter/sdk/models/errors";

const [mgmtKey, apiKey, keyHash, hookURL] = requireEnv(
  "TOLLGATE_BASE_URL", "TOLLGATE_MGMT_KEY", "TOLLGATE_API_KEY", "TOLLGATE_KEY_HASH", "TOLLGATE_HOOK_URL").slice(1);
const mgmt = client(mgmtKey);
const regular = client(apiKey);

const secrets = ["whsec-sdk-secret-0123456789", "sk-lf-secret-ABCDEFGHIJ", "glc-grafana-api-key-XYZ123456", "collector-token-0123456789"];
const noSecret = (v) => {
  const s = JSON.stringify(v);
  for (const x of secrets) assert.equal(s.includes(x), false, `response leaks ${x.slice(0, 6)}...`);
};
let hookID, otelID, langfuseID, grafanaID;

await step("observability.list empty", async () => {
  const res = await mgmt.observability.list();
  assert.deepEqual(res.result.data, []);
  assert.equal(res.result.totalCount, 0);
});

await step("observability.create webhook", async () => {
  const res = await mgmt.observability.create({ createObservabilityDestinationRequest: {
    name: "SDK hook",
    type: "webhook",
    config: { url: hookURL, secret: secrets[0] },
  } });
  noSecret(res);
  const d = res.data;
  hookID = d.id;
  assert.equal(d.type, "webhook");
  assert.equal(d.name, "SDK hook");
  assert.equal(d.enabled, true);
  assert.equal(d.config.url, hookURL);
  assert.equal(d.config.method, "POST");
  assert.equal(d.apiKeyHashes, null);
  assert.equal(d.filterRules, null);
  assert.equal(d.samplingRate, 1);
  assert.deepEqual(d.regions, ["global"]);
  assert.equal(d.privacyMode, false);
  assert.equal(typeof d.workspaceId, "string");
  assert.ok(!Number.isNaN(Date.parse(d.createdAt)), "createdAt parses");
});

await step("observability.create otel-collector with every field", async () => {
  const res = await mgmt.observability.create({ createObservabilityDestinationRequest: {
    name: "SDK collector",
    type: "otel-collector",
    config: { endpoint: "http://127.0.0.1:4318", headers: { "X-Token": secrets[3] } },
    apiKeyHashes: [keyHash],
    broadcastGenerationCost: true,
    broadcastGenerationIdentity: true,
    broadcastGenerationRequestContext: true,
    enabled: false,
    privacyMode: true,
    samplingRate: 0.25,
    regions: ["eu", "us"],
    filterRules: { groups: [{ logic: "or", rules: [{ field: "model", operator: "equals", value: "tollgate-mock" }, { field: "total_cost", operator: "gt", value: 0.001 }] }] },
  } });
  noSecret(res);
  const d = res.data;
  otelID = d.id;
  assert.equal(d.type, "otel-collector");
  assert.equal(d.config.endpoint, "http://127.0.0.1:4318");
  assert.deepEqual(d.apiKeyHashes, [keyHash]);
  assert.equal(d.broadcastGenerationCost, true);
  assert.equal(d.broadcastGenerationIdentity, true);
  assert.equal(d.broadcastGenerationRequestContext, true);
  assert.equal(d.enabled, false);
  assert.equal(d.privacyMode, true);
  assert.equal(d.samplingRate, 0.25);
  assert.deepEqual(d.regions, ["europe", "us"]);
  assert.equal(d.filterRules.enabled, true);
  assert.equal(d.filterRules.groups[0].logic, "or");
  assert.deepEqual(d.filterRules.groups[0].rules[1], { field: "total_cost", operator: "gt", value: 0.001 });
});

await step("observability.create langfuse and grafana", async () => {
  const lf = await mgmt.observability.create({ createObservabilityDestinationRequest: {
    name: "SDK Langfuse", type: "langfuse", config: { publicKey: "pk-lf-public-0123456789", secretKey: secrets[1] },
  } });
  noSecret(lf);
  langfuseID = lf.data.id;
  assert.equal(lf.data.config.baseUrl, "https://us.cloud.langfuse.com");
  assert.equal(lf.data.config.secretKey, "sk-l...GHIJ");
  const gf = await mgmt.observability.create({ createObservabilityDestinationRequest: {
    name: "SDK Grafana", type: "grafana", config: { instanceId: "123456", apiKey: secrets[2] },
  } });
  noSecret(gf);
  grafanaID = gf.data.id;
  assert.equal(gf.data.config.instanceId, "123456");
});

await step("observability.create unsupported type is 400", async () => {
  const err = await expectError(() =>
    mgmt.observability.create({ createObservabilityDestinationRequest: { name: "dd", type: "datadog", config: { apiKey: "x" } } }));
  assert.ok(err instanceof errors.BadRequestResponseError, `got ${err?.name}`);
  assert.match(err.body, /supported types: grafana, langfuse, otel-collector, webhook/);
});

await step("observability.get", async () => {
  const res = await mgmt.observability.get({ id: otelID });
  noSecret(res);
  assert.equal(res.data.id, otelID);
  assert.equal(res.data.config.headers["X-Token"], "coll...6789");
});

await step("observability.list pages", async () => {
  const seen = [];
  for await (const page of await mgmt.observability.list({ limit: 3 })) {
    assert.equal(page.result.totalCount, 4);
    noSecret(page.result);
    seen.push(...page.result.data.map((d) => d.id));
  }
  assert.deepEqual(seen, [grafanaID, langfuseID, otelID, hookID]);
});

await step("observability.update", async () => {
  const res = await mgmt.observability.update({
    id: otelID,
    updateObservabilityDestinationRequest: { name: "renamed", enabled: true, filterRules: null, apiKeyHashes: null, samplingRate: 1 },
  });
  noSecret(res);
  assert.equal(res.data.name, "renamed");
  assert.equal(res.data.enabled, true);
  assert.equal(res.data.filterRules, null);
  assert.equal(res.data.apiKeyHashes, null);
  assert.equal(res.data.samplingRate, 1);
  assert.equal(res.data.broadcastGenerationCost, true, "fields not sent are kept");
});

await step("observability.update bad filter is 400", async () => {
  const err = await expectError(() => mgmt.observability.update({
    id: otelID,
    updateObservabilityDestinationRequest: { filterRules: { groups: [{ rules: [{ field: "model", operator: "regex", value: "(" }] }] } },
  }));
  assert.equal(err.statusCode, 400);
});

await step("observability.list with a regular key is 403", async () => {
  const err = await expectError(() => regular.observability.list());
  assert.equal(err.statusCode, 403);
});

await step("observability.delete", async () => {
  const res = await mgmt.observability.delete({ id: langfuseID });
  assert.equal(res.deleted, true);
});

await step("observability.get deleted is 404", async () => {
  const err = await expectError(() => mgmt.observability.get({ id: langfuseID }));
  assert.ok(err instanceof errors.NotFoundResponseError, `got ${err?.name}`);
});

await step("observability.delete deleted is 404", async () => {
  const err = await expectError(() => mgmt.observability.delete({ id: langfuseID }));
  assert.equal(err.statusCode, 404);
});

await step("observability.update unknown is 404", async () => {
  const err = await expectError(() => mgmt.observability.update({ id: langfuseID, updateObservabilityDestinationRequest: { name: "x" } }));
  assert.equal(err.statusCode, 404);
});

done();

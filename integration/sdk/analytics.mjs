// Runs every analytics.* method and generations.submitFeedback of the
// public @openrouter/sdk against the gateway, which validates each response
// with its zod schemas. Driven by ../analytics_test.go, which made
// TOLLGATE_REQUESTS metered requests costing TOLLGATE_USAGE credits in all,
// TOLLGATE_GENERATION_ID among them.
import assert from "node:assert/strict";
import { client, done, expectError, requireEnv, step } from "./harness.mjs";
import * as errors from "@openrouter/sdk/models/errors";

const [, mgmtKey, apiKey, keyHash, genId, requests, usage] = requireEnv(
  "TOLLGATE_BASE_URL", "TOLLGATE_MGMT_KEY", "TOLLGATE_API_KEY", "TOLLGATE_KEY_HASH",
  "TOLLGATE_GENERATION_ID", "TOLLGATE_REQUESTS", "TOLLGATE_USAGE");
const mgmt = client(mgmtKey);
const regular = client(apiKey);
const today = new Date().toISOString().slice(0, 10);
const close = (a, b) => Math.abs(a - b) < 1e-12;
const sum = (rows, f) => rows.reduce((s, r) => s + r[f], 0);

await step("analytics.getAnalyticsMeta", async () => {
  const res = await mgmt.analytics.getAnalyticsMeta();
  const names = (l) => l.map((x) => x.name);
  for (const m of ["request_count", "usage", "prompt_tokens", "completion_tokens", "feedback_count"]) {
    assert.ok(names(res.data.metrics).includes(m), `metric ${m}`);
  }
  for (const d of ["model", "provider", "api_key_id", "end_user", "workspace"]) {
    assert.ok(names(res.data.dimensions).includes(d), `dimension ${d}`);
  }
  assert.deepEqual(names(res.data.granularities), ["hour", "day", "week", "month"]);
  assert.deepEqual(names(res.data.operators), ["eq", "neq", "in", "not_in"]);
  assert.equal(res.data.metrics.find((m) => m.name === "usage").displayFormat, "currency");
});

await step("analytics.getUserActivity", async () => {
  const res = await mgmt.analytics.getUserActivity();
  assert.ok(res.data.length > 0);
  assert.equal(sum(res.data, "requests"), Number(requests));
  assert.ok(close(sum(res.data, "usage"), Number(usage)), `usage ${sum(res.data, "usage")} != ${usage}`);
  for (const r of res.data) {
    assert.equal(r.date, today);
    assert.equal(r.providerName, "mock");
    assert.equal(r.modelPermaslug, r.model);
    assert.equal(r.workspaceId, undefined);
    assert.ok(r.promptTokens > 0 && r.completionTokens > 0);
  }
});

await step("analytics.getUserActivity with filters", async () => {
  const byKey = await mgmt.analytics.getUserActivity({ apiKeyHash: keyHash, date: today });
  assert.equal(sum(byKey.data, "requests"), Number(requests));
  const none = await mgmt.analytics.getUserActivity({ apiKeyHash: "0".repeat(64) });
  assert.deepEqual(none.data, []);
  const ws = await mgmt.analytics.getUserActivity({ groupBy: "workspace" });
  assert.ok(ws.data.every((r) => typeof r.workspaceId === "string" && r.workspaceId !== ""));
  const inWs = await mgmt.analytics.getUserActivity({ workspaceId: ws.data[0].workspaceId });
  assert.equal(sum(inWs.data, "requests"), Number(requests));
});

await step("analytics.getUserActivity bad date is 400", async () => {
  const err = await expectError(() => mgmt.analytics.getUserActivity({ date: "yesterday" }));
  assert.ok(err instanceof errors.BadRequestResponseError, `got ${err?.name}`);
});

await step("analytics.getUserActivity with a regular key is 403", async () => {
  const err = await expectError(() => regular.analytics.getUserActivity());
  assert.ok(err instanceof errors.ForbiddenResponseError, `got ${err?.name}`);
});

await step("analytics.queryAnalytics", async () => {
  const res = await mgmt.analytics.queryAnalytics({
    requestBody: {
      metrics: ["request_count", "usage", "total_tokens", "avg_latency_ms"],
      dimensions: ["model", "end_user"],
      filters: [{ field: "api_key_id", operator: "in", value: [keyHash] }],
      granularity: "day",
      timeRange: { start: new Date(Date.now() - 86400000), end: new Date(Date.now() + 60000) },
      orderBy: { field: "request_count", direction: "desc" },
      limit: 100,
      groupLimit: 10,
    },
  });
  assert.ok(res.data.data.length > 0);
  assert.equal(res.data.metadata.rowCount, res.data.data.length);
  assert.equal(res.data.metadata.truncated, false);
  assert.equal(typeof res.data.metadata.queryTimeMs, "number");
});

await step("analytics.queryAnalytics truncates at limit", async () => {
  const res = await mgmt.analytics.queryAnalytics({
    requestBody: { metrics: ["request_count"], dimensions: ["end_user"], limit: 1 },
  });
  assert.equal(res.data.metadata.rowCount, 1);
  assert.equal(res.data.metadata.truncated, true);
});

await step("analytics.queryAnalytics unknown metric is 400", async () => {
  const err = await expectError(() => mgmt.analytics.queryAnalytics({ requestBody: { metrics: ["vibes"] } }));
  assert.ok(err instanceof errors.BadRequestResponseError, `got ${err?.name}`);
  assert.match(err.message, /metrics\[0\]/);
});

await step("generations.submitFeedback", async () => {
  const res = await mgmt.generations.submitFeedback({
    submitGenerationFeedbackRequest: { generationId: genId, category: "incorrect_response", comment: "Repeated itself." },
  });
  assert.equal(res.data.success, true);
});

await step("generations.submitFeedback unknown generation is 404", async () => {
  const err = await expectError(() => mgmt.generations.submitFeedback({
    submitGenerationFeedbackRequest: { generationId: "gen-missing", category: "other" },
  }));
  assert.ok(err instanceof errors.NotFoundResponseError, `got ${err?.name}`);
});

await step("generations.submitFeedback with a regular key is 403", async () => {
  const err = await expectError(() => regular.generations.submitFeedback({
    submitGenerationFeedbackRequest: { generationId: genId, category: "other" },
  }));
  assert.equal(err.statusCode, 403);
});

await step("feedback is counted in analytics", async () => {
  const res = await mgmt.analytics.queryAnalytics({ requestBody: { metrics: ["feedback_count"] } });
  assert.equal(res.data.metadata.rowCount, 1);
});

done();

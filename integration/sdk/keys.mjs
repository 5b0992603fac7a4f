// Runs the public @openrouter/sdk against the gateway: the SDK validates
// every response with its zod schemas, so a field of the wrong type or a
// missing one fails here. Driven by ../sdk_test.go.
//
//   TOLLGATE_BASE_URL=http://127.0.0.1:9480/api/v1 TOLLGATE_MGMT_KEY=... node keys.mjs
import assert from "node:assert/strict";
import { client, done, expectError, requireEnv, step } from "./harness.mjs";
import * as errors from "@openrouter/sdk/models/errors";

const [mgmtKey] = requireEnv("TOLLGATE_BASE_URL", "TOLLGATE_MGMT_KEY").slice(1);
const mgmt = client(mgmtKey);

// Asserts the usage fields of a fresh key: all numbers, all zero.
function zeroUsage(rec) {
  for (const f of ["usage", "usageDaily", "usageWeekly", "usageMonthly",
    "byokUsage", "byokUsageDaily", "byokUsageWeekly", "byokUsageMonthly"]) {
    assert.equal(rec[f], 0, f);
  }
}

// A time with milliseconds: the gateway keeps them, so it round-trips exactly.
const expiresAt = new Date(Date.now() + 24 * 3600 * 1000 + 394);
let key, hash;

await step("credits.getCredits", async () => {
  const res = await mgmt.credits.getCredits();
  assert.equal(res.data.totalCredits, 10);
  assert.equal(res.data.totalUsage, 0);
});

await step("apiKeys.create", async () => {
  const res = await mgmt.apiKeys.create({
    requestBody: {
      name: "sdk-key",
      limit: 12.5,
      limitReset: "monthly",
      includeByokInLimit: true,
      expiresAt,
    },
  });
  assert.equal(typeof res.key, "string");
  assert.ok(res.key.length > 20, "key too short");
  const d = res.data;
  hash = d.hash;
  key = res.key;
  assert.equal(typeof hash, "string");
  assert.ok(hash.length > 0);
  assert.equal(d.name, "sdk-key");
  assert.equal(typeof d.label, "string");
  assert.notEqual(d.label, res.key, "label must not be the full key");
  assert.equal(d.disabled, false);
  assert.equal(d.limit, 12.5);
  assert.equal(d.limitRemaining, 12.5);
  assert.equal(d.limitReset, "monthly");
  assert.equal(d.includeByokInLimit, true);
  assert.ok(d.expiresAt instanceof Date, "expiresAt is a Date");
  assert.equal(d.expiresAt.getTime(), expiresAt.getTime());
  assert.ok(!Number.isNaN(Date.parse(d.createdAt)), `createdAt ${d.createdAt}`);
  assert.equal(typeof d.workspaceId, "string");
  zeroUsage(d);
});

await step("apiKeys.list", async () => {
  const res = await mgmt.apiKeys.list();
  assert.ok(Array.isArray(res.data));
  const rec = res.data.find((k) => k.hash === hash);
  assert.ok(rec, "created key listed");
  assert.equal(rec.name, "sdk-key");
  assert.equal(rec.limit, 12.5);
  assert.equal(JSON.stringify(res).includes(key), false, "list leaks the key");
});

await step("apiKeys.list offset past the end", async () => {
  const res = await mgmt.apiKeys.list({ offset: 100 });
  assert.deepEqual(res.data, []);
});

await step("apiKeys.get", async () => {
  const res = await mgmt.apiKeys.get({ hash });
  const d = res.data;
  assert.equal(d.hash, hash);
  assert.equal(d.name, "sdk-key");
  assert.equal(d.limitReset, "monthly");
  assert.equal(d.includeByokInLimit, true);
  assert.equal(d.expiresAt.getTime(), expiresAt.getTime());
});

await step("apiKeys.update", async () => {
  const res = await mgmt.apiKeys.update({
    hash,
    requestBody: { name: "sdk-key-renamed", disabled: true, limit: 7, limitReset: null },
  });
  const d = res.data;
  assert.equal(d.hash, hash);
  assert.equal(d.name, "sdk-key-renamed");
  assert.equal(d.disabled, true);
  assert.equal(d.limit, 7);
  assert.equal(d.limitRemaining, 7);
  assert.equal(d.limitReset, null);
  assert.equal(d.includeByokInLimit, true);
});

await step("apiKeys.list hides the disabled key", async () => {
  const res = await mgmt.apiKeys.list();
  assert.equal(res.data.some((k) => k.hash === hash), false);
});

await step("apiKeys.list includeDisabled", async () => {
  const res = await mgmt.apiKeys.list({ includeDisabled: true, offset: 0 });
  const rec = res.data.find((k) => k.hash === hash);
  assert.ok(rec, "disabled key listed with includeDisabled");
  assert.equal(rec.disabled, true);
  assert.equal(rec.name, "sdk-key-renamed");
});

await step("apiKeys.update re-enable", async () => {
  const res = await mgmt.apiKeys.update({ hash, requestBody: { disabled: false } });
  assert.equal(res.data.disabled, false);
  assert.equal(res.data.limit, 7);
});

const regular = client(key);

await step("apiKeys.getCurrentKeyMetadata", async () => {
  const res = await regular.apiKeys.getCurrentKeyMetadata();
  const d = res.data;
  assert.equal(typeof d.label, "string");
  assert.notEqual(d.label, key);
  assert.equal(d.limit, 7);
  assert.equal(d.limitRemaining, 7);
  assert.equal(d.limitReset, null);
  assert.equal(d.includeByokInLimit, true);
  zeroUsage(d);
  assert.equal(d.isFreeTier, false);
  assert.equal(d.isManagementKey, false);
  assert.equal(d.isProvisioningKey, false);
  assert.equal(d.expiresAt.getTime(), expiresAt.getTime());
  assert.equal(typeof d.freeModelDailyRequests, "object");
  assert.ok(Number.isInteger(d.freeModelDailyRequests.limit));
  assert.equal(d.freeModelDailyRequests.used, 0);
  assert.equal(d.freeModelDailyRequests.remaining, d.freeModelDailyRequests.limit);
  assert.ok(Number.isInteger(d.rateLimit.requests));
  assert.deepEqual(d.allowedDataRegions, ["global", "europe", "us"], "no guardrail restricts the key's regions");
});

await step("apiKeys.list with a regular key is 403", async () => {
  const err = await expectError(() => regular.apiKeys.list());
  assert.ok(err instanceof errors.OpenRouterError, `${err?.name}: ${err?.message}`);
  assert.equal(err.statusCode, 403);
});

await step("apiKeys.delete", async () => {
  const res = await mgmt.apiKeys.delete({ hash });
  assert.equal(res.deleted, true);
});

await step("apiKeys.get deleted is NotFound", async () => {
  const err = await expectError(() => mgmt.apiKeys.get({ hash }));
  assert.ok(err instanceof errors.NotFoundResponseError, `${err?.name}: ${err?.message}`);
  assert.equal(err.statusCode, 404);
  assert.equal(err.error.code, 404);
});

await step("apiKeys.getCurrentKeyMetadata with the deleted key is 401", async () => {
  const err = await expectError(() => regular.apiKeys.getCurrentKeyMetadata());
  assert.ok(err instanceof errors.UnauthorizedResponseError, `${err?.name}: ${err?.message}`);
  assert.equal(err.statusCode, 401);
});

done();

// Lists the gateway's model catalog through the public @openrouter/sdk,
// whose zod schemas refuse any missing field or wrong type. Driven by
// ../sdk_models_test.go.
//
//   TOLLGATE_BASE_URL=http://127.0.0.1:9480/api/v1 TOLLGATE_API_KEY=... TOLLGATE_MGMT_KEY=... node models.mjs
import assert from "node:assert/strict";
import { client, done, requireEnv, step } from "./harness.mjs";
import * as errors from "@openrouter/sdk/models/errors";

const [apiKey, mgmtKey] = requireEnv("TOLLGATE_BASE_URL", "TOLLGATE_API_KEY", "TOLLGATE_MGMT_KEY").slice(1);
const anonymous = client(undefined);

const wantIDs = ["tollgate-mock", "tollgate-mock:free", "mock/echo"];
// Checks one parsed model of the gateway's catalog.
function checkModel(m) {
  assert.equal(typeof m.id, "string");
  assert.equal(m.canonicalSlug, m.id);
  assert.equal(typeof m.name, "string");
  assert.ok(Number.isInteger(m.created), `created ${m.created}`);
  assert.deepEqual(m.architecture.inputModalities, ["text"]);
  assert.deepEqual(m.architecture.outputModalities, ["text"]);
  assert.equal(typeof m.pricing.prompt, "string");
  assert.equal(typeof m.pricing.completion, "string");
  assert.equal(m.topProvider.isModerated, false);
  assert.ok(Array.isArray(m.supportedParameters));
  assert.equal(m.links.details, `/api/v1/models/${m.id}/endpoints`);
}

await step("models.list without a key", async () => {
  const page = await anonymous.models.list();
  const res = page.result;
  assert.deepEqual(res.data.map((m) => m.id), wantIDs);
  assert.equal(res.totalCount, 3);
  assert.equal(res.links.next, null);
  res.data.forEach(checkModel);
  const paid = res.data[0];
  assert.equal(paid.pricing.prompt, "0.000001");
  assert.equal(paid.pricing.completion, "0.000002");
  assert.equal(paid.contextLength, 8192);
  const free = res.data[1];
  assert.equal(free.pricing.prompt, "0");
  assert.equal(free.pricing.completion, "0");
});

await step("models.list pages through the catalog", async () => {
  const ids = [];
  let pages = 0;
  for await (const page of await anonymous.models.list({ limit: 2 })) {
    pages++;
    assert.equal(page.result.totalCount, 3);
    ids.push(...page.result.data.map((m) => m.id));
  }
  assert.deepEqual(ids, wantIDs);
  assert.equal(pages, 2);
});

await step("models.listForUser", async () => {
  const page = await anonymous.models.listForUser({ bearer: apiKey });
  assert.deepEqual(page.result.data.map((m) => m.id), wantIDs);
  page.result.data.forEach(checkModel);
});

await step("models.listForUser with a management key is 403", async () => {
  let err;
  try {
    await anonymous.models.listForUser({ bearer: mgmtKey });
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof errors.ForbiddenResponseError, `${err?.name}: ${err?.message}`);
  assert.equal(err.statusCode, 403);
});

await step("models.list with a bad limit is 400", async () => {
  let err;
  try {
    await anonymous.models.list({ limit: 5000 });
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof errors.BadRequestResponseError, `${err?.name}: ${err?.message}`);
  assert.equal(err.statusCode, 400);
});

await step("models.get, by id and by family alias", async () => {
  const byID = await anonymous.models.get({ author: "mock", slug: "echo" });
  assert.equal(byID.data.id, "mock/echo");
  checkModel(byID.data);
  const byAlias = await anonymous.models.get({ author: "~mock", slug: "echo-latest" });
  assert.equal(byAlias.data.id, "mock/echo");
  let err;
  try {
    await anonymous.models.get({ author: "mock", slug: "none" });
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof errors.NotFoundResponseError, `${err?.name}: ${err?.message}`);
});

await step("models.list with filters and a sort", async () => {
  const page = await anonymous.models.list({ q: "mock", sort: "pricing-low-to-high", outputModalities: "text", supportedParameters: "temperature" });
  assert.deepEqual(page.result.data.map((m) => m.id), ["tollgate-mock:free", "tollgate-mock", "mock/echo"]);
  assert.equal(page.result.totalCount, 3);
  const none = await anonymous.models.list({ outputModalities: "image" });
  assert.deepEqual(none.result.data, []);
  let err;
  try {
    await anonymous.models.list({ sort: "most-popular" });
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof errors.BadRequestResponseError, `${err?.name}: ${err?.message}`);
  assert.match(err.message, /sort/);
});

await step("models.count", async () => {
  assert.equal((await anonymous.models.count()).data.count, 3);
  assert.equal((await anonymous.models.count({ outputModalities: "embeddings" })).data.count, 0);
});

await step("endpoints.listZdrEndpoints", async () => {
  const res = await anonymous.endpoints.listZdrEndpoints();
  assert.deepEqual(res.data, []); // no provider of this catalog states zdr
});

done();

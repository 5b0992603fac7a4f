// Drives both public SDKs (openai, @openrouter/sdk) against the gateway in
// front of the strict mock provider, which refuses what OpenAI refuses and
// streams usage only when asked: chat completions plain and streamed
// (without stream_options), the Responses route, feedback and generation
// lookup by the id of the answer, the endpoints and providers lists.
// Driven by ../compat_sdk_test.go.
//
//   TOLLGATE_BASE_URL=http://127.0.0.1:9480/api/v1 TOLLGATE_API_KEY=... TOLLGATE_MGMT_KEY=... node compat.mjs
import assert from "node:assert/strict";
import OpenAI from "openai";
import { client, done, requireEnv, step } from "./harness.mjs";

const [baseURL, apiKey, mgmtKey] = requireEnv("TOLLGATE_BASE_URL", "TOLLGATE_API_KEY", "TOLLGATE_MGMT_KEY");
const openai = new OpenAI({ apiKey, baseURL, maxRetries: 0 });
const openrouter = client(apiKey);
const mgmt = client(mgmtKey);
const model = "mock/echo";
const messages = [{ role: "user", content: "Hello there" }];

// checkIdentity: the answer names the generation, the catalog model and
// the provider, not the provider's own id and dated model.
function checkIdentity(obj) {
  assert.match(obj.id, /^gen-/, `id ${obj.id}`);
  assert.equal(obj.model, model);
  assert.equal(obj.provider, "mock");
}

function checkUsage(u) {
  assert.ok(u.prompt_tokens > 0 && u.completion_tokens > 0, "tokens counted");
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);
  assert.ok(u.cost > 0, "usage.cost");
  assert.equal(u.is_byok, false);
  assert.equal(typeof u.cost_details.upstream_inference_prompt_cost, "number");
}

const ids = [];

await step("openai chat.completions.create, with the gateway's own fields", async () => {
  // usage, transforms and a disabled plugin are the gateway's: the strict
  // provider would refuse each of them.
  const res = await openai.chat.completions.create({
    model, messages, max_tokens: 50,
    usage: { include: true }, transforms: [], plugins: [{ id: "moderation", enabled: false }],
    reasoning: { effort: "low" }, provider: { allow_fallbacks: true },
  });
  checkIdentity(res);
  checkUsage(res.usage);
  assert.match(res.choices[0].message.content, /^Mock answer from mock\/echo: Hello there/);
  ids.push(res.id);
});

await step("openai chat stream without stream_options ends with usage", async () => {
  const stream = await openai.chat.completions.create({ model, messages, stream: true });
  let text = "";
  let usage = null;
  let id = null;
  for await (const chunk of stream) {
    checkIdentity(chunk);
    id ??= chunk.id;
    assert.equal(chunk.id, id, "one id for every chunk");
    text += chunk.choices[0]?.delta?.content ?? "";
    if (chunk.usage) usage = chunk.usage;
  }
  assert.match(text, /^Mock answer/);
  assert.ok(usage, "a usage chunk");
  checkUsage(usage);
  ids.push(id);
});

await step("@openrouter/sdk chat.send plain and streamed", async () => {
  const res = await openrouter.chat.send({ chatRequest: { model, messages } });
  assert.match(res.id, /^gen-/);
  assert.equal(res.model, model);
  assert.ok(res.usage.cost > 0);
  const stream = await openrouter.chat.send({ chatRequest: { model, messages, stream: true } });
  let usage = null;
  for await (const chunk of stream) {
    assert.match(chunk.id, /^gen-/);
    if (chunk.usage) usage = chunk.usage;
  }
  assert.ok(usage && usage.cost > 0, "a usage chunk with cost");
});

await step("unknown plugin is a 400 naming it", async () => {
  const err = await openai.chat.completions.create({ model, messages, plugins: [{ id: "nope" }] }).catch((e) => e);
  assert.equal(err.status, 400);
  assert.match(err.message, /plugins\[0\]\.id: unknown plugin "nope"/);
});

let responseId;
await step("openai responses.create and previous_response_id", async () => {
  const res = await openai.responses.create({ model, input: "Hello there", reasoning: { effort: "low" } });
  assert.equal(res.status, "completed");
  assert.ok(res.usage.cost > 0);
  responseId = res.id;
  const next = await openai.responses.create({ model, input: "More", previous_response_id: res.id });
  assert.equal(next.status, "completed");
});

await step("@openrouter/sdk responses.send", async () => {
  const res = await openrouter.responses.send({ responsesRequest: { model, input: "Hello there" } });
  assert.equal(res.status, "completed");
});

await step("generations.getGeneration by every id the client saw", async () => {
  for (const id of [...ids, responseId]) {
    const res = await openrouter.generations.getGeneration({ id });
    assert.match(res.data.id, /^gen-/);
    assert.equal(res.data.model, model);
    assert.equal(res.data.providerName, "mock");
    assert.ok(res.data.totalCost > 0);
    assert.ok(res.data.tokensPrompt > 0);
  }
  const err = await openrouter.generations.getGeneration({ id: "gen-missing" }).catch((e) => e);
  assert.equal(err.statusCode, 404);
});

await step("generations.submitFeedback by the answer's id", async () => {
  for (const id of [ids[0], responseId]) {
    const res = await mgmt.generations.submitFeedback({ submitGenerationFeedbackRequest: { generationId: id, category: "other" } });
    assert.equal(res.data.success, true);
  }
});

await step("endpoints.list and providers.list", async () => {
  const res = await openrouter.endpoints.list({ author: "mock", slug: "echo" });
  assert.equal(res.data.id, model);
  assert.equal(res.data.endpoints.length, 1);
  assert.equal(res.data.endpoints[0].providerName, "mock");
  const providers = await openrouter.providers.list();
  assert.ok(providers.data.some((p) => p.slug === "mock"));
});

done();

// The auto router through the openai SDK: the brand's auto model served
// by the candidate the request's needs choose, which the answer names,
// streamed or not; the auto-router plugin's options as an extra body
// field, a bad one a 400 naming it. Driven by ../autorouter_test.go.
//
//   TOLLGATE_BASE_URL=http://127.0.0.1:9480/api/v1 TOLLGATE_API_KEY=... node autorouter.mjs
import assert from "node:assert/strict";
import OpenAI from "openai";
import { done, requireEnv, step } from "./harness.mjs";

const [baseURL, apiKey] = requireEnv("TOLLGATE_BASE_URL", "TOLLGATE_API_KEY");
const openai = new OpenAI({ apiKey, baseURL, maxRetries: 0 });
const messages = [{ role: "user", content: "hi" }];
const tools = [{ type: "function", function: { name: "lookup", parameters: { type: "object", properties: {} } } }];

await step("chat with model auto: the first candidate that fits answers", async () => {
  const res = await openai.chat.completions.create({ model: "service/auto", messages });
  assert.equal(res.model, "auto/tiny");
  assert.ok(res.usage.cost > 0, "charged");
});

await step("the reference's openrouter/auto is the same router", async () => {
  const res = await openai.chat.completions.create({ model: "openrouter/auto", messages });
  assert.equal(res.model, "auto/tiny");
});

await step("tools need a candidate that takes them", async () => {
  const res = await openai.chat.completions.create({ model: "service/auto", messages, tools });
  assert.equal(res.model, "auto/wide");
});

await step("a stream names the chosen model", async () => {
  const stream = await openai.chat.completions.create({ model: "service/auto", messages, stream: true });
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.model, "auto/tiny");
  }
  assert.ok(chunks > 0);
});

await step("plugin options: allowed_models narrows the candidates", async () => {
  const res = await openai.chat.completions.create({
    model: "service/auto", messages, plugins: [{ id: "auto-router", allowed_models: ["auto/wide"] }],
  });
  assert.equal(res.model, "auto/wide");
});

await step("a bad option is a 400 naming it", async () => {
  const err = await openai.chat.completions
    .create({ model: "service/auto", messages, plugins: [{ id: "auto-router", cost_tier: "cheapest" }] })
    .then(() => null, (e) => e);
  assert.ok(err instanceof OpenAI.BadRequestError, `got ${err}`);
  assert.match(err.message, /plugins\[0\]\.cost_tier/);
});

done();

// The response cache through the openai SDK: a streamed miss, then the same
// request again, replayed from the cache as a stream the SDK reads as any
// other (the same text, usage last, charged the cache price); the same for
// a non-streamed request. Driven by ../responsecache_test.go.
//
//   TOLLGATE_BASE_URL=http://127.0.0.1:9480/api/v1 TOLLGATE_API_KEY=... TOLLGATE_CACHE_PRICE=0.0001 node responsecache.mjs
import assert from "node:assert/strict";
import OpenAI from "openai";
import { done, requireEnv, step } from "./harness.mjs";

const [baseURL, apiKey, price] = requireEnv("TOLLGATE_BASE_URL", "TOLLGATE_API_KEY", "TOLLGATE_CACHE_PRICE");
const openai = new OpenAI({ apiKey, baseURL, maxRetries: 0 });
const model = "tollgate-mock";

// streamed reads a stream whole: its text, its last chunk's usage, and
// the answer's X-Cache.
async function streamed(content) {
  const { data, response } = await openai.chat.completions
    .create({ model, max_tokens: 24, stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content }] })
    .withResponse();
  let text = "";
  let usage = null;
  let chunks = 0;
  for await (const chunk of data) {
    chunks++;
    assert.equal(usage, null, "a chunk after the usage chunk");
    text += chunk.choices[0]?.delta?.content ?? "";
    if (chunk.usage) usage = chunk.usage;
  }
  return { text, usage, chunks, cache: response.headers.get("x-cache") };
}

const prompt = `tell me something cacheable ${Date.now()}`;

await step("a streamed miss, then a hit replayed as the same stream", async () => {
  const miss = await streamed(prompt);
  assert.equal(miss.cache, "MISS");
  assert.ok(miss.text.length > 0, "the miss streamed text");
  const hit = await streamed(prompt);
  assert.equal(hit.cache, "HIT");
  assert.equal(hit.text, miss.text);
  assert.ok(hit.chunks > 1, "the hit is streamed in chunks");
  assert.equal(hit.usage.completion_tokens, miss.usage.completion_tokens);
  assert.equal(hit.usage.prompt_tokens, miss.usage.prompt_tokens);
  assert.equal(hit.usage.cost, Number(price));
  assert.ok(hit.usage.response_cache_source_id, "the hit names its source generation");
});

await step("a non-streamed miss, then a hit", async () => {
  const ask = () =>
    openai.chat.completions.create({ model, max_tokens: 24, messages: [{ role: "user", content: prompt + " (whole)" }] }).withResponse();
  const miss = await ask();
  assert.equal(miss.response.headers.get("x-cache"), "MISS");
  const hit = await ask();
  assert.equal(hit.response.headers.get("x-cache"), "HIT");
  assert.equal(hit.data.choices[0].message.content, miss.data.choices[0].message.content);
  assert.equal(hit.data.usage.cost, Number(price));
  assert.equal(hit.data.usage.response_cache_source_id, miss.data.id);
});

done();

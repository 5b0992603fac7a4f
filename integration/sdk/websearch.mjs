// Web search through the public @openrouter/sdk: the deprecated web plugin
// and ":online" on chat completions, plain and streamed. The SDK validates
// every answer with its zod schemas (it drops chat annotations, which its
// schema lacks); the usage must report the search. Driven by
// ../websearch_test.go.
//
//   TOLLGATE_BASE_URL=http://127.0.0.1:9480/api/v1 TOLLGATE_API_KEY=... node websearch.mjs
import assert from "node:assert/strict";
import { client, done, requireEnv, step } from "./harness.mjs";

const [apiKey] = requireEnv("TOLLGATE_BASE_URL", "TOLLGATE_API_KEY").slice(1);
const sdk = client(apiKey);
const question = "Wo liegt Zürich? 日本語 🎉";

await step("chat.send with the web plugin", async () => {
  const res = await sdk.chat.send({
    chatRequest: { model: "ws/plain", messages: [{ role: "user", content: question }], plugins: [{ id: "web", maxResults: 3 }] },
  });
  const text = res.choices[0].message.content;
  assert.match(text, /\[[^\]]+\]\(https:\/\/[^)]+\)/);
  assert.equal(res.usage.serverToolUseDetails.webSearchRequests, 1);
  assert.ok(res.usage.cost > 0.012, `cost ${res.usage.cost} lacks the search`);
});

await step("chat.send stream with :online", async () => {
  const stream = await sdk.chat.send({
    chatRequest: { model: "ws/plain:online", messages: [{ role: "user", content: question }], stream: true },
  });
  let text = "";
  let usage;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? "";
    if (chunk.usage) usage = chunk.usage;
  }
  assert.match(text, /\[[^\]]+\]\(https:\/\/[^)]+\)/);
  assert.equal(usage.serverToolUseDetails.webSearchRequests, 1);
});

done();

// Reranks and generates images through the public @openrouter/sdk
// (rerank.rerank, images.generate, whose zod schemas validate the
// answers strictly) and the openai SDK (images.generate). Driven by
// ../sdk_routes_test.go.
//
//   TOLLGATE_BASE_URL=http://127.0.0.1:9480/api/v1 TOLLGATE_API_KEY=... node routes.mjs
import assert from "node:assert/strict";
import OpenAI from "openai";
import { client, done, requireEnv, step } from "./harness.mjs";

const [baseURL, apiKey] = requireEnv("TOLLGATE_BASE_URL", "TOLLGATE_API_KEY");
const or = client(apiKey);

await step("rerank.rerank", async () => {
  const res = await or.rerank.rerank({
    requestBody: {
      model: "cohere/rerank-v3.5",
      query: "capital of France",
      documents: ["Berlin is in Germany", "Paris is the capital of France"],
      topN: 1,
    },
  });
  assert.equal(res.model, "cohere/rerank-v3.5");
  assert.equal(res.results.length, 1);
  assert.equal(res.results[0].index, 1);
  assert.equal(res.results[0].document.text, "Paris is the capital of France");
  assert.equal(res.usage.searchUnits, 1);
  assert.equal(res.usage.cost, 0.002);
});

await step("images.generate (@openrouter/sdk)", async () => {
  const res = await or.images.generate({
    imageGenerationRequest: { model: "openai/gpt-image-1", prompt: "a red panda astronaut", n: 2 },
  });
  assert.equal(res.data.length, 2);
  assert.ok(res.data[0].b64Json.length > 0);
  assert.equal(res.usage.cost, 0.08);
});

await step("images.listModels, images.listModelEndpoints", async () => {
  const list = await or.images.listModels();
  assert.deepEqual(list.data.map((m) => m.id), ["openai/gpt-image-1", "openai/dall-e-3", "openai/gpt-image-1-images-fewer"]);
  const eps = await or.images.listModelEndpoints({ author: "openai", slug: "gpt-image-1" });
  assert.equal(eps.endpoints[0].pricing[0].costUsd, 0.04);
});

await step("images.generate (openai)", async () => {
  const openai = new OpenAI({ apiKey, baseURL, maxRetries: 0 });
  const res = await openai.images.generate({ model: "openai/gpt-image-1", prompt: "a red panda astronaut" });
  assert.equal(res.data.length, 1);
  assert.ok(res.data[0].b64_json.length > 0);
  assert.equal(res.usage.cost, 0.04);
});

done();

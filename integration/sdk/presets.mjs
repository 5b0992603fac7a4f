// Makes and reads presets through the public @openrouter/sdk (presets.*,
// whose zod schemas validate the answers strictly) with a management
// key, then names one as the model with the openai SDK. Driven by
// ../sdk_presets_test.go.
//
//   TOLLGATE_BASE_URL=http://127.0.0.1:9480/api/v1 TOLLGATE_MGMT_KEY=... TOLLGATE_API_KEY=... node presets.mjs
import assert from "node:assert/strict";
import OpenAI from "openai";
import { client, done, requireEnv, step } from "./harness.mjs";

const [baseURL, mgmtKey, apiKey] = requireEnv("TOLLGATE_BASE_URL", "TOLLGATE_MGMT_KEY", "TOLLGATE_API_KEY");
const or = client(mgmtKey);

await step("presets.createPresetsChatCompletions", async () => {
  const res = await or.presets.createPresetsChatCompletions({
    slug: "sdk-preset",
    chatRequest: {
      model: "tollgate-mock",
      temperature: 0.5,
      messages: [
        { role: "system", content: "Answer in one word." },
        { role: "user", content: "ignored" },
      ],
    },
  });
  assert.equal(res.data.slug, "sdk-preset");
  assert.equal(res.data.status, "active");
  assert.equal(res.data.designatedVersion.version, 1);
  assert.deepEqual(res.data.designatedVersion.config, { model: "tollgate-mock", temperature: 0.5 });
  assert.equal(res.data.designatedVersion.systemPrompt, "Answer in one word.");
});

await step("presets.createPresetsMessages", async () => {
  const res = await or.presets.createPresetsMessages({
    slug: "sdk-preset",
    messagesRequest: { model: "tollgate-mock", maxTokens: 64, system: "Answer in two words.", messages: [{ role: "user", content: "x" }] },
  });
  assert.equal(res.data.designatedVersion.version, 2);
  assert.equal(res.data.designatedVersion.config.max_tokens, 64);
});

await step("presets.list, get, listVersions, getVersion", async () => {
  const pages = await or.presets.list({});
  assert.equal(pages.result.totalCount, 1);
  assert.equal(pages.result.data[0].slug, "sdk-preset");
  const got = await or.presets.get({ slug: "sdk-preset" });
  assert.equal(got.data.designatedVersion.systemPrompt, "Answer in two words.");
  const versions = await or.presets.listVersions({ slug: "sdk-preset" });
  assert.deepEqual(versions.result.data.map((v) => v.version), [1, 2]);
  const one = await or.presets.getVersion({ slug: "sdk-preset", version: "1" });
  assert.equal(one.data.config.temperature, 0.5);
});

await step("chat.completions.create with model @preset/<slug> (openai)", async () => {
  const openai = new OpenAI({ apiKey, baseURL, maxRetries: 0 });
  const res = await openai.chat.completions.create({ model: "@preset/sdk-preset", messages: [{ role: "user", content: "hi" }] });
  assert.equal(res.model, "tollgate-mock");
  assert.ok(res.choices[0].message.content.length > 0);
});

done();

// The response-healing plugin through the openai SDK, the plugin passed as
// an extra body field: the strict mock answers with broken JSON (its
// mock-answer marker), and what the SDK hands the application parses, on
// chat completions and Responses; X-Response-Healing names the repairs.
// Driven by ../healing_sdk_test.go.
//
//   TOLLGATE_BASE_URL=http://127.0.0.1:9480/api/v1 TOLLGATE_API_KEY=... node healing.mjs
import assert from "node:assert/strict";
import OpenAI from "openai";
import { done, requireEnv, step } from "./harness.mjs";

const [baseURL, apiKey] = requireEnv("TOLLGATE_BASE_URL", "TOLLGATE_API_KEY");
const openai = new OpenAI({ apiKey, baseURL, maxRetries: 0 });
const model = "tollgate-mock";
const broken = "Sure! Here it is:\n```json\n{name: 'Ada', \"age\": 36,}\n```";
const plugins = [{ id: "response-healing" }];
const person = {
  type: "object",
  properties: { name: { type: "string" }, age: { type: "integer" } },
  required: ["name", "age"],
  additionalProperties: false,
};

await step("chat json_object: the content parses", async () => {
  const { data, response } = await openai.chat.completions
    .create({ model, messages: [{ role: "user", content: "mock-answer: " + broken }], response_format: { type: "json_object" }, plugins })
    .withResponse();
  assert.deepEqual(JSON.parse(data.choices[0].message.content), { name: "Ada", age: 36 });
  assert.equal(response.headers.get("x-response-healing"), "repaired=code_fence,prose,trailing_comma,unquoted_key,single_quote");
  assert.ok(data.usage.cost > 0, "charged from usage");
});

await step("chat json_schema: checked against the schema", async () => {
  const { data, response } = await openai.chat.completions
    .create({
      model, messages: [{ role: "user", content: "mock-answer: " + broken }], plugins,
      response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema: person } },
    })
    .withResponse();
  assert.deepEqual(JSON.parse(data.choices[0].message.content), { name: "Ada", age: 36 });
  assert.match(response.headers.get("x-response-healing"), /; schema=valid$/);
});

await step("responses json_schema: output_text parses", async () => {
  const { data, response } = await openai.responses
    .create({
      model, input: "mock-answer: " + broken, plugins,
      text: { format: { type: "json_schema", name: "person", strict: true, schema: person } },
    })
    .withResponse();
  assert.deepEqual(JSON.parse(data.output_text), { name: "Ada", age: 36 });
  assert.match(response.headers.get("x-response-healing"), /^repaired=code_fence.*; schema=valid$/);
});

await step("a malformed plugin object is a 400 naming the field", async () => {
  const err = await openai.chat.completions
    .create({ model, messages: [{ role: "user", content: "hi" }], response_format: { type: "json_object" }, plugins: [{ id: "response-healing", level: 2 }] })
    .then(() => null, (e) => e);
  assert.ok(err instanceof OpenAI.BadRequestError, `got ${err}`);
  assert.match(err.message, /plugins\[0\]\.level/);
});

done();

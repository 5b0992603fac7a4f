// Web search on the Responses route through the public openai SDK
// (responses.create, plain and streamed, and responses.stream) and
// @openrouter/sdk (responses.send, plain and streamed), for models served
// by a provider that speaks Responses (passed through) and by one that
// speaks only Chat Completions (translated): a gateway-side engine (exa,
// against the engines' test double) asked for with the deprecated web
// plugin and with the openrouter:web_search server tool, and native
// searches. Every answer must parse, carry its url_citation annotations
// with [start_index, end_index) being exactly the cited [title](url) in
// code points of the non-ASCII text, the same streamed and plain, with
// gap-free sequence numbers, and report the search in usage. Driven by
// ../websearch_responses_test.go.
//
//   TOLLGATE_BASE_URL=http://127.0.0.1:9480/api/v1 TOLLGATE_API_KEY=... \
//   TOLLGATE_ENGINE_MODELS=ws/chat,ws/plain TOLLGATE_NATIVE_MODELS=openai/gpt-chat,openai/gpt-ws \
//   node websearch_responses.mjs
import assert from "node:assert/strict";
import OpenAI from "openai";
import { client, done, requireEnv, step } from "./harness.mjs";

const [baseURL, apiKey, engineModels, nativeModels] = requireEnv(
  "TOLLGATE_BASE_URL", "TOLLGATE_API_KEY", "TOLLGATE_ENGINE_MODELS", "TOLLGATE_NATIVE_MODELS");
const openai = new OpenAI({ apiKey, baseURL, maxRetries: 0 });
const openrouter = client(apiKey);
const question = "Größte Stadt der Schweiz? 日本語 🎉";

// Each form in the wire (snake_case) shape the openai SDK sends as is, and
// in @openrouter/sdk's camelCase shape; annotations and results are what
// the mock and the engines' double give; search is the search's price.
const engineForms = [
  {
    name: "web plugin, exa",
    wire: { plugins: [{ id: "web", engine: "exa", max_results: 3 }] },
    camel: { plugins: [{ id: "web", engine: "exa", maxResults: 3 }] },
    annotations: 3, results: 3, search: 0.012,
  },
  {
    name: "openrouter:web_search, exa",
    wire: { tools: [{ type: "openrouter:web_search", parameters: { engine: "exa", max_results: 3 } }] },
    camel: { tools: [{ type: "openrouter:web_search", parameters: { engine: "exa", maxResults: 3 } }] },
    annotations: 3, results: 3, search: 0.012,
  },
];
const nativeForms = [
  {
    name: "openrouter:web_search, native",
    wire: { tools: [{ type: "openrouter:web_search" }] },
    camel: { tools: [{ type: "openrouter:web_search" }] },
    annotations: 2, results: 5, search: 0.02,
  },
];

// checkCitations checks the annotations against the text: JS strings
// count UTF-16 units, the indices count code points.
function checkCitations(text, annotations, form, camel) {
  assert.notEqual(Array.from(text).length, text.length, "the answer has characters beyond the BMP");
  assert.ok(Array.isArray(annotations), "annotations present");
  assert.equal(annotations.length, form.annotations, `${form.annotations} annotations`);
  const chars = Array.from(text);
  for (const a of annotations) {
    assert.equal(a.type, "url_citation");
    const start = camel ? a.startIndex : a.start_index;
    const end = camel ? a.endIndex : a.end_index;
    assert.ok(start >= 0 && end <= chars.length && start < end, `span [${start},${end}) within ${chars.length}`);
    assert.equal(chars.slice(start, end).join(""), `[${a.title}](${a.url})`);
  }
}

// checkUsage: the search is reported and charged on top of the tokens
// (prompt 0.000001, completion 0.000002 per token).
function checkUsage(u, form, camel) {
  const input = camel ? u.inputTokens : u.input_tokens;
  const output = camel ? u.outputTokens : u.output_tokens;
  const details = camel ? u.serverToolUseDetails : u.server_tool_use_details;
  assert.ok(input > 0 && output > 0, "tokens counted");
  assert.equal(camel ? details.webSearchRequests : details.web_search_requests, 1, "one search request");
  if (!camel) assert.equal(details.web_search_results, form.results, "search results counted");
  const want = input * 0.000001 + output * 0.000002 + form.search;
  assert.ok(Math.abs(Number(u.cost) - want) < 1e-9, `usage.cost ${u.cost}, want ${want}`);
}

function messagePart(output) {
  const msg = output.find((item) => item.type === "message");
  assert.ok(msg, "a message item");
  assert.equal(msg.role, "assistant");
  const part = msg.content[0];
  assert.equal(part.type, "output_text");
  return part;
}

const runs = [
  ...engineModels.split(",").flatMap((model) => engineForms.map((form) => ({ model, form }))),
  ...nativeModels.split(",").flatMap((model) => nativeForms.map((form) => ({ model, form }))),
];

for (const { model, form } of runs) {
  const name = `${model}, ${form.name}`;
  let plain; // the plain answer's text and annotations

  await step(`${name}: openai responses.create`, async () => {
    const res = await openai.responses.create({ model, input: question, ...form.wire });
    assert.equal(res.object, "response");
    assert.equal(res.status, "completed");
    const part = messagePart(res.output);
    assert.equal(res.output_text, part.text);
    checkCitations(part.text, part.annotations, form, false);
    checkUsage(res.usage, form, false);
    plain = { text: part.text, annotations: part.annotations };
  });

  await step(`${name}: openai responses.create stream`, async () => {
    const stream = await openai.responses.create({ model, input: question, stream: true, ...form.wire });
    let text = "";
    let seq = 0;
    let final;
    const added = [];
    for await (const ev of stream) {
      assert.equal(ev.sequence_number, seq++, `sequence_number of ${ev.type}`);
      if (ev.type === "response.output_text.delta") text += ev.delta;
      if (ev.type === "response.output_text.annotation.added") {
        assert.equal(ev.annotation_index, added.length);
        added.push(ev.annotation);
      }
      if (ev.type === "response.completed") final = ev.response;
    }
    assert.ok(final, "response.completed received");
    assert.equal(text, plain.text);
    assert.deepEqual(added, plain.annotations);
    const part = messagePart(final.output);
    assert.equal(part.text, plain.text);
    assert.deepEqual(part.annotations, plain.annotations);
    checkCitations(text, added, form, false);
    checkUsage(final.usage, form, false);
  });

  await step(`${name}: openai responses.stream`, async () => {
    const stream = openai.responses.stream({ model, input: question, ...form.wire });
    let text = "";
    stream.on("response.output_text.delta", (ev) => { text += ev.delta; });
    const types = new Set();
    for await (const ev of stream) types.add(ev.type);
    const res = await stream.finalResponse();
    assert.ok(types.has("response.output_text.annotation.added"), "annotation events");
    assert.equal(text, plain.text);
    assert.equal(res.output_text, plain.text);
    const part = messagePart(res.output);
    assert.deepEqual(part.annotations, plain.annotations);
    checkCitations(res.output_text, part.annotations, form, false);
    checkUsage(res.usage, form, false);
  });

  await step(`${name}: @openrouter/sdk responses.send`, async () => {
    const res = await openrouter.responses.send({ responsesRequest: { model, input: question, ...form.camel } });
    assert.equal(res.object, "response");
    assert.equal(res.status, "completed");
    const part = messagePart(res.output);
    assert.equal(part.text, plain.text);
    checkCitations(part.text, part.annotations, form, true);
    checkUsage(res.usage, form, true);
  });

  await step(`${name}: @openrouter/sdk responses.send stream`, async () => {
    const stream = await openrouter.responses.send({ responsesRequest: { model, input: question, stream: true, ...form.camel } });
    let text = "";
    let seq = 0;
    let final;
    const added = [];
    for await (const ev of stream) {
      assert.equal(ev.sequenceNumber, seq++, `sequenceNumber of ${ev.type}`);
      if (ev.type === "response.output_text.delta") text += ev.delta;
      if (ev.type === "response.output_text.annotation.added") added.push(ev.annotation);
      if (ev.type === "response.completed") final = ev.response;
    }
    assert.ok(final, "response.completed received");
    assert.equal(text, plain.text);
    checkCitations(text, added, form, true);
    const part = messagePart(final.output);
    assert.deepEqual(part.annotations, added);
    checkCitations(part.text, part.annotations, form, true);
    checkUsage(final.usage, form, true);
  });
}

done();

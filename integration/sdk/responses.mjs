// Runs the public openai SDK (responses.create, responses.stream) and
// @openrouter/sdk (responses.send, plain and streamed) against the
// gateway's Responses route, for each model of TOLLGATE_MODELS (one served
// by a chat-only provider through translation, one passed through to a
// provider that speaks Responses). The mock's citing model answers with two
// url_citation annotations; the conversation sent carries an earlier
// assistant answer with its id, status and annotations. Driven by
// ../responses_sdk_test.go.
//
//   TOLLGATE_BASE_URL=http://127.0.0.1:9480/api/v1 TOLLGATE_API_KEY=... \
//   TOLLGATE_MODELS=rt/chat,rt/native node responses.mjs
import assert from "node:assert/strict";
import OpenAI from "openai";
import { client, done, requireEnv, step } from "./harness.mjs";

const [baseURL, apiKey, models] = requireEnv("TOLLGATE_BASE_URL", "TOLLGATE_API_KEY", "TOLLGATE_MODELS");
const openai = new OpenAI({ apiKey, baseURL, maxRetries: 0 });
const openrouter = client(apiKey);

const earlier = {
  type: "message",
  id: "msg_earlier",
  status: "completed",
  role: "assistant",
  content: [{
    type: "output_text",
    text: "See [Café](https://example.com/caf%C3%A9).",
    annotations: [{ type: "url_citation", url: "https://example.com/caf%C3%A9", title: "Café", start_index: 4, end_index: 40 }],
  }],
};
// The same conversation in the openai SDK's (wire) form and in
// @openrouter/sdk's camelCase form.
const input = [
  { type: "message", role: "user", content: [{ type: "input_text", text: "Où est le café?" }] },
  earlier,
  { type: "message", role: "user", content: [{ type: "input_text", text: "Und die Quellen?" }] },
];
const inputCamel = input.map((item) => item.role !== "assistant" ? item : {
  ...item,
  content: item.content.map((p) => ({
    ...p,
    annotations: p.annotations.map(({ start_index, end_index, ...a }) => ({ ...a, startIndex: start_index, endIndex: end_index })),
  })),
});

// checkCitations checks that each url_citation spans exactly its markdown
// link, counting code points.
function checkCitations(text, annotations, camel) {
  assert.equal(annotations.length, 2, "two annotations");
  const chars = Array.from(text);
  for (const a of annotations) {
    assert.equal(a.type, "url_citation");
    const start = camel ? a.startIndex : a.start_index;
    const end = camel ? a.endIndex : a.end_index;
    assert.equal(chars.slice(start, end).join(""), `[${a.title}](${a.url})`);
  }
}

function checkUsage(u, camel) {
  const input = camel ? u.inputTokens : u.input_tokens;
  const output = camel ? u.outputTokens : u.output_tokens;
  const total = camel ? u.totalTokens : u.total_tokens;
  assert.ok(input > 0 && output > 0, "tokens counted");
  assert.equal(total, input + output);
  assert.ok(Number(u.cost) > 0, "usage.cost present");
}

for (const model of models.split(",")) {
  let plainText;

  await step(`${model}: openai responses.create`, async () => {
    const res = await openai.responses.create({ model, input, instructions: "Cite sources.", max_output_tokens: 200 });
    assert.equal(res.object, "response");
    assert.equal(res.status, "completed");
    const msg = res.output[0];
    assert.equal(msg.type, "message");
    assert.equal(msg.role, "assistant");
    assert.equal(msg.status, "completed");
    const part = msg.content[0];
    assert.equal(part.type, "output_text");
    assert.equal(res.output_text, part.text);
    assert.match(part.text, /^Mock answer from /);
    checkCitations(part.text, part.annotations, false);
    checkUsage(res.usage, false);
    assert.equal(res.instructions, "Cite sources.");
    assert.equal(res.max_output_tokens, 200);
    plainText = part.text;
  });

  await step(`${model}: openai responses.create stream`, async () => {
    const stream = await openai.responses.create({ model, input, instructions: "Cite sources.", stream: true });
    let text = "";
    let seq = 0;
    let final;
    const added = [];
    for await (const ev of stream) {
      assert.equal(ev.sequence_number, seq++);
      if (ev.type === "response.output_text.delta") text += ev.delta;
      if (ev.type === "response.output_text.annotation.added") added.push(ev.annotation);
      if (ev.type === "response.completed") final = ev.response;
    }
    assert.ok(final, "response.completed received");
    assert.equal(text, plainText);
    assert.deepEqual(final.output[0].content[0].annotations, added);
    checkCitations(text, added, false);
    checkUsage(final.usage, false);
  });

  await step(`${model}: openai responses.stream`, async () => {
    const stream = openai.responses.stream({ model, input, instructions: "Cite sources." });
    const types = new Set();
    let text = "";
    stream.on("response.output_text.delta", (ev) => { text += ev.delta; });
    for await (const ev of stream) types.add(ev.type);
    const res = await stream.finalResponse();
    for (const t of ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
      "response.output_text.delta", "response.output_text.annotation.added", "response.output_text.done",
      "response.content_part.done", "response.output_item.done", "response.completed"]) {
      assert.ok(types.has(t), `event ${t}`);
    }
    assert.equal(text, plainText);
    assert.equal(res.output_text, plainText);
    checkCitations(res.output_text, res.output[0].content[0].annotations, false);
    checkUsage(res.usage, false);
  });

  await step(`${model}: @openrouter/sdk responses.send`, async () => {
    const res = await openrouter.responses.send({
      responsesRequest: { model, input: inputCamel, instructions: "Cite sources.", maxOutputTokens: 200 },
    });
    assert.equal(res.object, "response");
    assert.equal(res.status, "completed");
    const msg = res.output[0];
    assert.equal(msg.type, "message");
    assert.equal(msg.role, "assistant");
    const part = msg.content[0];
    assert.equal(part.type, "output_text");
    assert.equal(part.text, plainText);
    checkCitations(part.text, part.annotations, true);
    checkUsage(res.usage, true);
  });

  await step(`${model}: @openrouter/sdk responses.send stream`, async () => {
    const stream = await openrouter.responses.send({
      responsesRequest: { model, input: inputCamel, instructions: "Cite sources.", stream: true },
    });
    let text = "";
    let seq = 0;
    let final;
    const types = [];
    for await (const ev of stream) {
      assert.equal(ev.sequenceNumber, seq++);
      if (types.at(-1) !== ev.type) types.push(ev.type);
      if (ev.type === "response.output_text.delta") text += ev.delta;
      if (ev.type === "response.completed") final = ev.response;
    }
    assert.deepEqual(types, ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
      "response.output_text.delta", "response.output_text.annotation.added", "response.output_text.done",
      "response.content_part.done", "response.output_item.done", "response.completed"]);
    assert.ok(final, "response.completed received");
    assert.equal(text, plainText);
    checkCitations(text, final.output[0].content[0].annotations, true);
    checkUsage(final.usage, true);
  });
}

// A provider stream that breaks mid-answer (the gateway already sent 200)
// ends with response.failed, which both SDKs parse.
const breakModel = process.env.TOLLGATE_BREAK_MODEL;
if (breakModel) {
  await step(`${breakModel}: @openrouter/sdk responses.send stream, broken`, async () => {
    const stream = await openrouter.responses.send({ responsesRequest: { model: breakModel, input: "tell me more", stream: true } });
    let text = "";
    let last;
    let seq = 0;
    for await (const ev of stream) {
      assert.equal(ev.sequenceNumber, seq++);
      if (ev.type === "response.output_text.delta") text += ev.delta;
      last = ev;
    }
    assert.ok(text.length > 0, "some text before the break");
    assert.equal(last.type, "response.failed");
    assert.equal(last.response.status, "failed");
    assert.ok(last.response.error?.message, "error message");
  });

  await step(`${breakModel}: openai responses.create stream, broken`, async () => {
    const stream = await openai.responses.create({ model: breakModel, input: "tell me more", stream: true });
    let last;
    for await (const ev of stream) last = ev;
    assert.equal(last.type, "response.failed");
    assert.equal(last.response.status, "failed");
  });
}

// A function call answered by a chat-only provider, translated.
const toolModel = process.env.TOLLGATE_TOOL_MODEL;
if (toolModel) {
  const tools = [{ type: "function", name: "weather", parameters: { type: "object", properties: { city: { type: "string" } } }, strict: false }];
  const checkCall = (item) => {
    assert.equal(item.type, "function_call");
    assert.equal(item.name, "weather");
    assert.equal(item.arguments, '{"city":"Köln"}');
    assert.equal(item.call_id ?? item.callId, "call_1");
  };

  await step(`${toolModel}: openai responses.create function call`, async () => {
    const res = await openai.responses.create({ model: toolModel, input: "Wetter in Köln?", tools });
    assert.equal(res.output.length, 1);
    checkCall(res.output[0]);
  });

  await step(`${toolModel}: openai responses.stream function call`, async () => {
    const stream = openai.responses.stream({ model: toolModel, input: "Wetter in Köln?", tools });
    let args = "";
    stream.on("response.function_call_arguments.delta", (ev) => { args += ev.delta; });
    const res = await stream.finalResponse();
    assert.equal(args, '{"city":"Köln"}');
    checkCall(res.output[0]);
  });

  await step(`${toolModel}: @openrouter/sdk responses.send function call, plain and streamed`, async () => {
    const res = await openrouter.responses.send({ responsesRequest: { model: toolModel, input: "Wetter in Köln?", tools } });
    checkCall(res.output[0]);
    const stream = await openrouter.responses.send({ responsesRequest: { model: toolModel, input: "Wetter in Köln?", tools, stream: true } });
    let final;
    for await (const ev of stream) if (ev.type === "response.completed") final = ev.response;
    checkCall(final.output[0]);
  });
}

done();

// Runs the public @anthropic-ai/sdk against the gateway's Messages route
// with only its base URL changed (the gateway's /api, under which the SDK
// calls /v1/messages): messages.create plain and streamed, messages.stream
// (text events, finalMessage), tool use answered with a tool_result, a 402
// surfaced as the SDK's PaymentRequiredError, and a Claude-Code-like
// request (a bearer auth token, system blocks with cache_control, tools,
// streamed). Every answer's usage.cost must be its tokens at the test
// catalog's prices, and the key's usage the sum of them. Driven by
// ../messages_sdk_test.go.
//
//   TOLLGATE_BASE_URL=http://127.0.0.1:9480/api/v1 TOLLGATE_API_KEY=... \
//   TOLLGATE_CAPPED_KEY=... TOLLGATE_TOOL_MODEL=mx/tool node messages.mjs
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";
import { done, expectError, requireEnv, step } from "./harness.mjs";

const [base, apiKey, cappedKey, toolModel] = requireEnv("TOLLGATE_BASE_URL", "TOLLGATE_API_KEY", "TOLLGATE_CAPPED_KEY", "TOLLGATE_TOOL_MODEL");
const baseURL = base.replace(/\/v1\/?$/, "");
const anthropic = new Anthropic({ apiKey, baseURL, maxRetries: 0 });
const model = "tollgate-mock";
const messages = [{ role: "user", content: "Say hello to the world" }];

// Prices of the test catalog, in nano-credits per token.
const promptNano = 1000, completionNano = 2000;
let chargedNano = 0;

// checkUsage checks a Messages usage and that its cost is its tokens at
// the prices, and adds the cost to what the key must have been charged.
function checkUsage(u, cost) {
  assert.ok(u.input_tokens > 0 && u.output_tokens > 0, `tokens counted: ${JSON.stringify(u)}`);
  assert.equal(typeof u.cache_read_input_tokens, "number");
  assert.equal(typeof u.cache_creation_input_tokens, "number");
  const prompt = u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens;
  const nano = Math.round(Number(cost) * 1e9);
  assert.equal(nano, prompt * promptNano + u.output_tokens * completionNano, `usage.cost ${cost} for ${JSON.stringify(u)}`);
  chargedNano += nano;
}

let plainText;

await step("messages.create", async () => {
  const msg = await anthropic.messages.create({ model, max_tokens: 200, system: "Be brief.", messages });
  assert.equal(msg.type, "message");
  assert.equal(msg.role, "assistant");
  assert.equal(msg.model, model);
  assert.match(msg.id, /^gen-/);
  assert.equal(msg.stop_reason, "end_turn");
  assert.equal(msg.stop_sequence, null);
  assert.equal(msg.content.length, 1);
  assert.equal(msg.content[0].type, "text");
  assert.match(msg.content[0].text, /^Mock answer from tollgate-mock.*Say hello to the world$/);
  checkUsage(msg.usage, msg.usage.cost);
  plainText = msg.content[0].text;
});

await step("messages.create stream", async () => {
  const stream = await anthropic.messages.create({ model, max_tokens: 200, system: "Be brief.", messages, stream: true });
  const types = [];
  let text = "", delta;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") text += ev.delta.text;
    if (ev.type === "message_delta") delta = ev;
  }
  assert.equal(types[0], "message_start");
  assert.equal(types[1], "content_block_start");
  assert.deepEqual(types.slice(-3), ["content_block_stop", "message_delta", "message_stop"]);
  assert.equal(text, plainText);
  assert.equal(delta.delta.stop_reason, "end_turn");
  checkUsage(delta.usage, delta.usage.cost);
});

await step("messages.stream: text events and finalMessage", async () => {
  const stream = anthropic.messages.stream({ model, max_tokens: 200, messages });
  let text = "", cost;
  stream.on("text", (t) => { text += t; });
  stream.on("streamEvent", (ev) => { if (ev.type === "message_delta") cost = ev.usage.cost; });
  const msg = await stream.finalMessage();
  assert.equal(text, plainText);
  assert.equal(msg.content[0].text, plainText);
  assert.equal(msg.stop_reason, "end_turn");
  checkUsage(msg.usage, cost);
});

const tools = [{
  name: "weather",
  description: "The weather in a city",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
}];

await step("tool use answered with a tool_result", async () => {
  const question = { role: "user", content: "Wetter in Köln?" };
  const call = await anthropic.messages.create({ model: toolModel, max_tokens: 100, tools, messages: [question] });
  assert.equal(call.stop_reason, "tool_use");
  const use = call.content.find((b) => b.type === "tool_use");
  assert.ok(use, "a tool_use block");
  assert.equal(use.name, "weather");
  assert.deepEqual(use.input, { city: "Köln" });
  checkUsage(call.usage, call.usage.cost);

  const answer = await anthropic.messages.create({
    model, max_tokens: 100, tools, messages: [
      question,
      { role: "assistant", content: call.content },
      { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "18 degrees" }, { type: "text", text: "Danke" }] },
    ],
  });
  assert.equal(answer.stop_reason, "end_turn");
  assert.match(answer.content[0].text, /Danke$/);
  checkUsage(answer.usage, answer.usage.cost);

  const stream = anthropic.messages.stream({ model: toolModel, max_tokens: 100, tools, tool_choice: { type: "any" }, messages: [question] });
  let json = "", cost;
  stream.on("inputJson", (partial) => { json += partial; });
  stream.on("streamEvent", (ev) => { if (ev.type === "message_delta") cost = ev.usage.cost; });
  const streamed = await stream.finalMessage();
  assert.equal(streamed.stop_reason, "tool_use");
  assert.equal(streamed.content[0].type, "tool_use");
  assert.deepEqual(streamed.content[0].input, { city: "Köln" });
  assert.equal(json, JSON.stringify({ city: "Köln" }));
  checkUsage(streamed.usage, cost);
});

await step("402 is the SDK's PaymentRequiredError", async () => {
  const capped = new Anthropic({ apiKey: cappedKey, baseURL, maxRetries: 0 });
  const err = await expectError(() => capped.messages.create({ model, max_tokens: 4000, messages }));
  assert.ok(err instanceof Anthropic.PaymentRequiredError, `${err?.constructor?.name}: ${err?.message}`);
  assert.equal(err.status, 402);
  assert.equal(err.error.type, "error");
  assert.equal(err.error.error.type, "billing_error");
  assert.equal(err.error.error.code, 402);
  assert.match(err.error.error.message, /fewer max_tokens/);
  assert.equal(err.error.error.metadata.limit_source, "service_key_limit");
});

await step("400 names max_tokens", async () => {
  const err = await expectError(() => anthropic.messages.create({ model, messages }));
  assert.ok(err instanceof Anthropic.BadRequestError, `${err?.constructor?.name}: ${err?.message}`);
  assert.equal(err.error.error.message, "max_tokens: required (a positive integer)");
});

await step("Claude-Code-like request: auth token, cached system blocks, tools, stream", async () => {
  const claude = new Anthropic({
    apiKey: null, authToken: apiKey, baseURL, maxRetries: 0,
    defaultHeaders: { "anthropic-beta": "claude-code-20250219,prompt-caching-2024-07-31" },
  });
  const stream = claude.messages.stream({
    model, max_tokens: 1024, temperature: 1,
    system: [
      { type: "text", text: "You are Claude Code, Anthropic's official CLI for Claude." },
      { type: "text", text: "Answer in one line.", cache_control: { type: "ephemeral" } },
    ],
    tools: [{
      name: "Read", description: "Reads a file",
      input_schema: { type: "object", properties: { file_path: { type: "string" } }, required: ["file_path"] },
      cache_control: { type: "ephemeral" },
    }],
    metadata: { user_id: "user_0123_account__session_abc" },
    messages: [{ role: "user", content: [{ type: "text", text: "List the files", cache_control: { type: "ephemeral" } }] }],
  });
  let cost;
  stream.on("streamEvent", (ev) => { if (ev.type === "message_delta") cost = ev.usage.cost; });
  const msg = await stream.finalMessage();
  assert.equal(msg.stop_reason, "end_turn");
  assert.match(msg.content[0].text, /List the files$/);
  checkUsage(msg.usage, cost);
});

await step("the key was charged what the answers reported", async () => {
  const res = await fetch(`${base}/key`, { headers: { Authorization: `Bearer ${apiKey}` } });
  assert.equal(res.status, 200);
  const { data } = await res.json();
  assert.equal(Math.round(data.usage * 1e9), chargedNano);
});

done();

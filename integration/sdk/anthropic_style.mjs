// Runs the public openai SDK against a model served by an Anthropic-style
// provider (style anthropic: the gateway translates to Anthropic's
// Messages API and back): chat.completions.create plain and streamed, a
// tool call round trip, a three-turn tool loop with thinking, and
// responses.create / responses.stream. Driven
// by ../anthropic_outbound_test.go.
//
//   TOLLGATE_BASE_URL=http://127.0.0.1:9480/api/v1 TOLLGATE_API_KEY=... \
//   TOLLGATE_MODEL=anthropic/claude-mock TOLLGATE_THINKING_MODEL=acme/claude-bare \
//   node anthropic_style.mjs
import assert from "node:assert/strict";
import OpenAI from "openai";
import { done, requireEnv, step } from "./harness.mjs";

const [baseURL, apiKey, model] = requireEnv("TOLLGATE_BASE_URL", "TOLLGATE_API_KEY", "TOLLGATE_MODEL");
const openai = new OpenAI({ apiKey, baseURL, maxRetries: 0 });
const upstream = model.split("/")[1];

await step("chat.completions.create", async () => {
  const res = await openai.chat.completions.create({
    model, messages: [{ role: "system", content: "Be brief" }, { role: "user", content: "hello sdk" }],
  });
  assert.equal(res.object, "chat.completion");
  assert.match(res.id, /^gen-/);
  assert.equal(res.choices[0].message.content, `Mock answer from ${upstream}: hello sdk`);
  assert.equal(res.choices[0].finish_reason, "stop");
  assert.ok(res.usage.prompt_tokens > 0 && res.usage.completion_tokens > 0);
  assert.ok(Number(res.usage.cost) > 0, "usage.cost present");
});

await step("chat.completions.create stream", async () => {
  const stream = await openai.chat.completions.create({
    model, stream: true, messages: [{ role: "user", content: "hello sdk" }],
  });
  let text = "";
  let finish;
  let usage;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? "";
    finish = chunk.choices[0]?.finish_reason ?? finish;
    usage = chunk.usage ?? usage;
  }
  assert.equal(text, `Mock answer from ${upstream}: hello sdk`);
  assert.equal(finish, "stop");
  assert.ok(Number(usage.cost) > 0, "usage.cost present");
});

await step("tool call round trip", async () => {
  const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { query: { type: "string" } } } } }];
  const messages = [{ role: "user", content: "get_weather for Oslo" }];
  const first = await openai.chat.completions.create({ model, tools, messages });
  assert.equal(first.choices[0].finish_reason, "tool_calls");
  const call = first.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, "get_weather");
  assert.equal(JSON.parse(call.function.arguments).query, "get_weather for Oslo");
  messages.push(first.choices[0].message, { role: "tool", tool_call_id: call.id, content: "snow" });
  const second = await openai.chat.completions.create({ model, tools, messages });
  assert.equal(second.choices[0].message.content, `Mock answer from ${upstream}: tool result snow`);
});

await step("thinking tool loop, three turns", async () => {
  // With thinking on, Anthropic wants each tool loop's assistant message
  // back with its signed thinking: the SDK keeps reasoning_details on the
  // message, and the gateway turns them back into thinking blocks.
  const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { query: { type: "string" } } } } }];
  // A model whose output limit leaves room for a thinking budget.
  const thinker = process.env.TOLLGATE_THINKING_MODEL ?? model;
  const upstream = thinker.split("/")[1];
  const ask = (messages, extra = {}) =>
    openai.chat.completions.create({ model: thinker, tools, messages, max_tokens: 4000, reasoning: { effort: "medium" }, ...extra });
  const messages = [{ role: "user", content: "get_weather for Oslo" }];
  const first = await ask(messages);
  assert.equal(first.choices[0].finish_reason, "tool_calls");
  const details = first.choices[0].message.reasoning_details;
  assert.equal(details[0].type, "reasoning.text");
  assert.ok(details[0].signature, "the thinking's signature");
  const call = first.choices[0].message.tool_calls[0];
  messages.push(first.choices[0].message, { role: "tool", tool_call_id: call.id, content: "snow" });
  // Without its thinking the turn is refused, as Anthropic refuses it.
  const { reasoning_details: _, ...bare } = first.choices[0].message;
  await assert.rejects(ask([messages[0], bare, messages[2]]), (err) => err.status === 400);
  const second = await ask(messages);
  assert.equal(second.choices[0].message.content, `Mock answer from ${upstream}: tool result snow`);
  messages.push(second.choices[0].message, { role: "user", content: "get_weather for Bergen" });

  // Turn three, streamed: reasoning_details arrive in pieces merged by index.
  const stream = await ask(messages, { stream: true });
  const streamed = { role: "assistant", content: "", reasoning_details: [], tool_calls: [] };
  for await (const chunk of stream) {
    const delta = chunk.choices[0]?.delta ?? {};
    streamed.content += delta.content ?? "";
    for (const d of delta.reasoning_details ?? []) streamed.reasoning_details.push(d);
    for (const c of delta.tool_calls ?? []) {
      const t = (streamed.tool_calls[c.index] ??= { id: c.id, type: "function", function: { name: "", arguments: "" } });
      t.function.name += c.function?.name ?? "";
      t.function.arguments += c.function?.arguments ?? "";
    }
  }
  assert.equal(streamed.tool_calls[0].function.name, "get_weather");
  assert.ok(streamed.reasoning_details.some((d) => d.signature), "a streamed signature");
  messages.push(streamed, { role: "tool", tool_call_id: streamed.tool_calls[0].id, content: "rain" });
  const third = await ask(messages);
  assert.equal(third.choices[0].message.content, `Mock answer from ${upstream}: tool result rain`);
});

await step("responses.create", async () => {
  const res = await openai.responses.create({ model, instructions: "Be brief", input: "hello responses", max_output_tokens: 100 });
  assert.equal(res.status, "completed");
  assert.equal(res.output_text, `Mock answer from ${upstream}: hello responses`);
  assert.ok(Number(res.usage.cost) > 0, "usage.cost present");
});

await step("responses.stream", async () => {
  const stream = openai.responses.stream({ model, input: "hello responses" });
  let text = "";
  for await (const ev of stream) {
    if (ev.type === "response.output_text.delta") text += ev.delta;
  }
  const final = await stream.finalResponse();
  assert.equal(text, `Mock answer from ${upstream}: hello responses`);
  assert.equal(final.output_text, text);
});

done();

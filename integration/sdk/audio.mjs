// Speaks and transcribes through the public @openrouter/sdk
// (tts.createSpeech, stt.createTranscription and its multipart form,
// whose zod schemas validate the answers) and the openai SDK
// (audio.speech.create, audio.transcriptions.create). Driven by
// ../sdk_audio_test.go.
//
//   TOLLGATE_BASE_URL=http://127.0.0.1:9480/api/v1 TOLLGATE_API_KEY=... node audio.mjs
import assert from "node:assert/strict";
import OpenAI, { toFile } from "openai";
import { client, done, requireEnv, step } from "./harness.mjs";

const [baseURL, apiKey] = requireEnv("TOLLGATE_BASE_URL", "TOLLGATE_API_KEY");
const or = client(apiKey);
const openai = new OpenAI({ apiKey, baseURL, maxRetries: 0 });

// wav is a 16-bit mono WAV of seconds at 8 kHz.
function wav(seconds) {
  const data = 16000 * seconds;
  const b = Buffer.alloc(44 + data);
  b.write("RIFF", 0);
  b.writeUInt32LE(36 + data, 4);
  b.write("WAVEfmt ", 8);
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20);
  b.writeUInt16LE(1, 22);
  b.writeUInt32LE(8000, 24);
  b.writeUInt32LE(16000, 28);
  b.writeUInt16LE(2, 32);
  b.writeUInt16LE(16, 34);
  b.write("data", 36);
  b.writeUInt32LE(data, 40);
  return b;
}

async function readAll(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return Buffer.concat(chunks);
}

await step("tts.createSpeech (@openrouter/sdk)", async () => {
  const stream = await or.tts.createSpeech({
    speechRequest: { model: "openai/tts-1", input: "Hello world", voice: "nova", responseFormat: "mp3" },
  });
  assert.equal((await readAll(stream)).length, 11 * 128);
});

await step("audio.speech.create (openai)", async () => {
  const res = await openai.audio.speech.create({ model: "openai/tts-1", input: "Hello", voice: "alloy", response_format: "pcm" });
  assert.equal(res.headers.get("content-type"), "audio/pcm");
  assert.equal(Buffer.from(await res.arrayBuffer()).length, 5 * 128);
});

await step("stt.createTranscription (@openrouter/sdk)", async () => {
  const res = await or.stt.createTranscription({
    sttRequest: { model: "openai/whisper-1", inputAudio: { data: wav(2).toString("base64"), format: "wav" } },
  });
  assert.match(res.text, /^Transcript of audio\.wav/);
  assert.equal(res.usage.seconds, 2);
  assert.equal(res.usage.cost, 0.02);
});

await step("stt.createTranscriptionMultipart (@openrouter/sdk)", async () => {
  const res = await or.stt.createTranscriptionMultipart({
    requestBody: { file: { fileName: "hello.wav", content: new Uint8Array(wav(3)) }, model: "openai/whisper-1", language: "en" },
  });
  assert.equal(res.usage.seconds, 3);
  assert.equal(res.usage.cost, 0.03);
});

await step("audio.transcriptions.create (openai)", async () => {
  const res = await openai.audio.transcriptions.create({ model: "openai/whisper-1", file: await toFile(wav(1), "hello.wav") });
  assert.match(res.text, /^Transcript of audio\.wav/);
  assert.equal(res.usage.seconds, 1);
  assert.equal(res.usage.cost, 0.01);
});

done();

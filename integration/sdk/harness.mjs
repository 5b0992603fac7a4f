// What every SDK script shares: its environment, a client that never
// retries (so the first answer is the one validated), and a step runner
// that prints the closing "sdk: N passed, M failed" line.
import assert from "node:assert/strict";
import { OpenRouter } from "@openrouter/sdk";

// requireEnv returns the named variables, exiting 2 when one is missing.
export function requireEnv(...names) {
  const missing = names.filter((n) => !process.env[n]);
  if (missing.length > 0) {
    console.error(`${missing.join(", ")} must be set`);
    process.exit(2);
  }
  return names.map((n) => process.env[n]);
}

// client talks to the gateway at TOLLGATE_BASE_URL with apiKey.
export function client(apiKey) {
  return new OpenRouter({ apiKey, serverURL: process.env.TOLLGATE_BASE_URL, retryConfig: { strategy: "none" } });
}

let passed = 0;

// step runs one named check; the first failure ends the script with 1.
export async function step(name, fn) {
  try {
    await fn();
  } catch (err) {
    console.log(`FAIL ${name}: ${err?.name ?? "Error"}: ${err?.message ?? err}`);
    if (err?.statusCode !== undefined) console.log(`  status: ${err.statusCode}`);
    if (err?.rawValue !== undefined) console.log(`  rawValue: ${JSON.stringify(err.rawValue)}`);
    if (err?.cause !== undefined) console.log(`  cause: ${err.cause?.message ?? err.cause}`);
    if (err?.body !== undefined) console.log(`  body: ${err.body}`);
    console.log(`sdk: ${passed} passed, 1 failed`);
    process.exit(1);
  }
  passed++;
  console.log(`ok   ${name}`);
}

// done prints the closing line of a script whose steps all passed.
export function done() {
  console.log(`sdk: ${passed} passed, 0 failed`);
}

// expectError runs fn and returns the error it must throw.
export async function expectError(fn) {
  try {
    await fn();
  } catch (err) {
    return err;
  }
  assert.fail("expected an error, got a result");
}

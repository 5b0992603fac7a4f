// Writes into corpus.json the token counts of each text by OpenAI's own
// tokenizer (the npm package "tiktoken": tiktoken's Rust core built to
// WebAssembly). To add a text, add {"text": ...} to corpus.json and run
// from this folder:
//   npm install tiktoken@1 && node reference.js
const { get_encoding } = require("tiktoken");
const fs = require("fs");
const rows = JSON.parse(fs.readFileSync("corpus.json", "utf8"));
for (const name of ["o200k_base", "cl100k_base"]) {
  const enc = get_encoding(name);
  for (const row of rows) row[name] = enc.encode_ordinary(row.text).length;
  enc.free();
}
fs.writeFileSync("corpus.json", JSON.stringify(rows, null, 1) + "\n");

// Regenerates tests/data/tokenizer/{qwen3,gpt2}_golden.json: the ids HuggingFace `tokenizers`
// (the Rust implementation through its official Node bindings) gives each text of corpus.json
// with each tokenizer, without special tokens added. Ids only; the tokenizer files are fetched
// at set-up (scripts/fetch_tokenizers.mjs), never committed.
//
//   node tests/data/tokenizer/gen_golden.mjs
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..", "..", "..");
const { Tokenizer } = createRequire(import.meta.url)("tokenizers");
const { texts } = JSON.parse(readFileSync(join(here, "corpus.json"), "utf8"));
for (const name of ["qwen3", "gpt2"]) {
  const tokenizer = Tokenizer.fromFile(join(repo, ".cache", "tokenizers", name, "tokenizer.json"));
  const ids = [];
  for (const text of texts) ids.push(Array.from((await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds()));
  writeFileSync(join(here, `${name}_golden.json`), JSON.stringify({ generator: "tests/data/tokenizer/gen_golden.mjs", ids }) + "\n");
  console.log(`${name}: wrote ${ids.length} encodings`);
}

// Regenerates tests/data/tokenizer/{qwen3,gpt2}_golden.json: the ids HuggingFace `tokenizers`
// (the Rust implementation through its official Node bindings) gives each text of corpus.json
// with each tokenizer, without special tokens added; and what it decodes them back to: all of
// them, the first half (often cut inside a character: its replacement characters are golden
// too), and all of them with special tokens skipped. Ids and texts only; the tokenizer files
// are fetched at set-up (scripts/fetch_tokenizers.mjs), never committed.
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
  const ids = [], decoded = [], decoded_half = [], decoded_skipping_special = [], decoded_prefixes = [];
  for (const text of texts) {
    const encoding = Array.from((await tokenizer.encode(text, null, { addSpecialTokens: false })).getIds());
    ids.push(encoding);
    decoded.push(await tokenizer.decode(encoding, false));
    decoded_half.push(await tokenizer.decode(encoding.slice(0, Math.floor(encoding.length / 2)), false));
    decoded_skipping_special.push(await tokenizer.decode(encoding, true));
    const prefixes = [];  // byte-level tokens often end inside a character: each cut is golden
    for (let k = 1; k <= Math.min(encoding.length, 24); k++) prefixes.push(await tokenizer.decode(encoding.slice(0, k), false));
    decoded_prefixes.push(prefixes);
  }
  writeFileSync(join(here, `${name}_golden.json`),
                JSON.stringify({ generator: "tests/data/tokenizer/gen_golden.mjs", ids, decoded, decoded_half,
                                 decoded_skipping_special, decoded_prefixes }) + "\n");
  console.log(`${name}: wrote ${ids.length} encodings`);
}

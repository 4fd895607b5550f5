// HuggingFace tokenizers (Rust, official Node bindings) on the texts kvr_bench_tokenizer uses:
// this repository's docs (English prose) and core sources (code). Prints MB/s per text, the
// median of 5 passes after one warm-up pass.
//   node bench/tokenizer_hf.mjs
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..");
const { Tokenizer } = createRequire(import.meta.url)("tokenizers");
const tokenizer = Tokenizer.fromFile(join(repo, ".cache", "tokenizers", "qwen3", "tokenizer.json"));
const corpus = (dir, ext) =>
  readdirSync(join(repo, dir)).filter((f) => f.endsWith(ext)).sort().map((f) => readFileSync(join(repo, dir, f), "utf8")).join("");
for (const [name, text] of [["prose", corpus("docs", ".md")], ["code", corpus("core", ".cpp")]]) {
  const bytes = Buffer.byteLength(text);
  await tokenizer.encode(text, null, { addSpecialTokens: false });
  const rates = [];
  let tokens = 0;
  for (let i = 0; i < 5; i++) {
    const start = process.hrtime.bigint();
    const encoding = await tokenizer.encode(text, null, { addSpecialTokens: false });
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    tokens = encoding.getIds().length;
    rates.push(bytes / seconds / 1e6);
  }
  rates.sort((a, b) => a - b);
  console.log(`${name}: ${bytes} bytes, ${tokens} tokens, HF tokenizers ${rates[2].toFixed(1)} MB/s`);
}

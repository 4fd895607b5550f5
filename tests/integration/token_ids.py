"""Token ids of texts from both sides of a golden comparison: HuggingFace `tokenizers` (its
official Node bindings, from the repository's node_modules) and `kvrouter tokenize`."""
import json
import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HF_ENCODE = """
const { Tokenizer } = require("tokenizers");
const texts = JSON.parse(require("fs").readFileSync(0, "utf8"));
(async () => {
  const t = Tokenizer.fromFile(process.argv[1]);
  const out = [];
  for (const text of texts) out.push(Array.from((await t.encode(text, null, { addSpecialTokens: false })).getIds()));
  process.stdout.write(JSON.stringify(out));
})();
"""


def huggingface_ids(tokenizer_json, texts, timeout=300):
    """The ids HuggingFace gives each text (no special tokens added)."""
    return json.loads(subprocess.run(["node", "-e", HF_ENCODE, tokenizer_json], input=json.dumps(texts),
                                     capture_output=True, text=True, check=True, timeout=timeout, cwd=REPO).stdout)


def kvrouter_ids(kvrouter, tokenizer_json, texts, timeout=300):
    """The ids `kvrouter tokenize --json-lines` gives each text: one list per line it printed."""
    ours = subprocess.run([kvrouter, "tokenize", "--tokenizer", tokenizer_json, "--json-lines"],
                          input="".join(json.dumps(t) + "\n" for t in texts), capture_output=True, text=True,
                          check=True, timeout=timeout)
    return [json.loads(line) for line in ours.stdout.splitlines()]

#!/usr/bin/python3
"""Integration: words far longer than kvrouter's merge window (core/prompt/bpe_merge.hpp merges
a piece of more than 68 KiB a 64 KiB window at a time, so that one huge word costs a window's
memory) tokenize to exactly the ids HuggingFace `tokenizers` (official Node bindings) gives for
them whole: one letter, spaces, tabs and newlines, repeated patterns, random letters of several
scripts, emoji and punctuation, each of 100 KiB to 1 MiB in one pre-tokenizer piece.

usage: long_words_test.py KVROUTER_BINARY QWEN3_TOKENIZER_JSON"""
import random
import sys

from router_harness import Failures
from token_ids import huggingface_ids, kvrouter_ids


def random_word(rng, alphabet, size):
    return "".join(rng.choice(alphabet) for _ in range(size))


def long_words():
    rng = random.Random(40)
    kib = 1024
    return {
        "one letter, 1 MiB": "a" * (1024 * kib),
        "one letter, an odd length": "a" * (300 * kib + 7),
        "spaces": " " * (500 * kib),
        "tabs and newlines": "\t\n " * (120 * kib),
        "ab repeated": "ab" * (200 * kib),
        "a word repeated without spaces": "encyclopedia" * (30 * kib),
        "random lowercase letters": random_word(rng, "abcdefghijklmnopqrstuvwxyz", 400 * kib),
        "random letters of both cases": random_word(rng, "aAbBeEiInNoOsStTzZ", 400 * kib),
        "random letters of few kinds": random_word(rng, "ae", 400 * kib),
        "Cyrillic": random_word(rng, "абвгдеёжзийклмнопрст", 200 * kib),
        "Chinese": random_word(rng, "的一是不了人我在有他这中大来上国", 150 * kib),
        "emoji": random_word(rng, "😀😂🙂🚀🌍", 100 * kib),
        "punctuation": random_word(rng, "!?.,;:-_=+*/#@%&", 300 * kib),
        "a word before and after": "start " + "b" * (200 * kib) + " end",
    }


def main():
    kvrouter, tokenizer_json = sys.argv[1], sys.argv[2]
    f = Failures()
    words = long_words()
    texts = list(words.values())
    reference = huggingface_ids(tokenizer_json, texts)
    ours = kvrouter_ids(kvrouter, tokenizer_json, texts)
    f.check(len(ours) == len(texts), f"one line of ids per text ({len(ours)} of {len(texts)})")
    for (what, text), theirs, mine in zip(words.items(), reference, ours):
        first = next((i for i, (a, b) in enumerate(zip(theirs, mine)) if a != b), min(len(theirs), len(mine)))
        f.check(mine == theirs, f"{what} ({len(text.encode())} bytes): {len(mine)} ids as HuggingFace's {len(theirs)}"
                                f"{'' if mine == theirs else f', first difference at id {first}'}")
    f.exit()


main()

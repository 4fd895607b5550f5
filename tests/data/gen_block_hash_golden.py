#!/usr/bin/python3
"""Regenerates tests/data/block_hash_golden.json with python3-xxhash (Debian), an implementation
of XXH3 independent of the router's C++ code path, following docs/architecture.md §4:

  local   = XXH3-64(seed, tokens as LE u32 ‖ sorted image hashes as LE u64)
  seed    = 1337, or XXH3-64(lora_name, 1337) with a LoRA; block 0 with a cache salt:
            XXH3-64(salt, <that seed>)
  seq[0]  = local[0];  seq[i] = XXH3-64(1337, seq[i-1] ‖ local[i] as LE u64)

Run: /usr/bin/python3 tests/data/gen_block_hash_golden.py > tests/data/block_hash_golden.json
"""
import json
import struct
import xxhash

SEED = 1337


def h(data, seed=SEED):
    return xxhash.xxh3_64_intdigest(data, seed=seed)


def local_hashes(tokens, block_size, images, lora, salt):
    seed = h(lora.encode()) if lora else SEED
    first = h(salt.encode(), seed) if salt else seed
    out = []
    for b in range(len(tokens) // block_size):
        begin, end = b * block_size, (b + 1) * block_size
        data = struct.pack(f"<{block_size}I", *tokens[begin:end])
        touching = sorted(img["hash"] for img in images
                          if img["count"] > 0 and img["offset"] < end and img["offset"] + img["count"] > begin)
        data += b"".join(struct.pack("<Q", x) for x in touching)
        out.append(h(data, first if b == 0 else seed))
    return out


def sequence_hashes(local):
    seq = []
    for i, x in enumerate(local):
        seq.append(x if i == 0 else h(struct.pack("<QQ", seq[-1], x)))
    return seq


def case(name, tokens, block_size, images=(), lora="", salt=""):
    local = local_hashes(tokens, block_size, list(images), lora, salt)
    return {"name": name, "tokens": tokens, "block_size": block_size, "images": list(images),
            "lora_name": lora, "cache_salt": salt,
            "local": [str(x) for x in local], "sequence": [str(x) for x in sequence_hashes(local)]}


cases = [
    case("one block of four", [1, 2, 3, 4], 4),
    case("partial last block is not hashed", [1, 2, 3, 4, 5, 6], 4),
    case("three blocks of sixteen", list(range(100, 148)), 16),
    case("large token ids", [151643, 151644, 4294967295, 0, 7, 8, 9, 10], 4),
    case("image inside block 1", list(range(32)), 8,
         images=[{"offset": 10, "count": 3, "hash": 0x0123456789ABCDEF}]),
    case("image spanning blocks 0 to 2, with a second image in block 2", list(range(24)), 8,
         images=[{"offset": 20, "count": 2, "hash": 0xFEDCBA9876543210}, {"offset": 4, "count": 14, "hash": 42}]),
    case("lora adapter", [1, 2, 3, 4, 5, 6, 7, 8], 4, lora="my-adapter"),
    case("cache salt", [1, 2, 3, 4, 5, 6, 7, 8], 4, salt="tenant-a"),
    case("lora and salt", [1, 2, 3, 4, 5, 6, 7, 8], 4, lora="my-adapter", salt="tenant-a"),
]
print(json.dumps({"generator": "tests/data/gen_block_hash_golden.py (python3-xxhash " + xxhash.XXHASH_VERSION + ")",
                  "cases": cases}, indent=1))

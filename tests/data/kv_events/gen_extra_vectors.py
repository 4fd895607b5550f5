#!/usr/bin/python3
"""Regenerates tests/data/kv_events/extra_vectors.tsv: the shapes of docs/kv-events.md that the
shared vectors (shared/testdata/kv_events/vectors.tsv) do not cover, encoded with python3-msgpack
the way the engines' msgspec encoders lay them out (array_like structs: every field positional;
map structs: defaults omitted).

Run: /usr/bin/python3 tests/data/kv_events/gen_extra_vectors.py > tests/data/kv_events/extra_vectors.tsv
"""
import msgpack

DIGEST = "0123456789abcdef" + "f" * 48  # a 64-hex-digit multimodal identifier

cases = [
    ("sglang_8_element_store_with_metadata_map",
     "SGLang array store, 8 elements, int64 hashes [-5, 6], parent 3, metadata map {cache_salt: s1} at position 7",
     [1.5, [["BlockStored", [-5, 6], 3, list(range(1, 9)), 4, None, "GPU", {"cache_salt": "s1"}]], 0]),
    ("sglang_eagle_token_pairs",
     "SGLang EAGLE: token_ids as [token, next] pairs; hash 10; block_size 4",
     [1.5, [["BlockStored", [10], None, [[1, 2], [2, 3], [3, 4], [4, 5]], 4, None, "GPU"]], 0]),
    ("vllm_map_lora_images_salt",
     "map store, LoRA sql-lora, block 0 extra keys [lora, [digest, 2], tenant-7], block 1 [lora, [img-b, -3]]",
     [2.0, [{"type": "BlockStored", "block_hashes": [21, 22], "parent_block_hash": None,
             "token_ids": list(range(8)), "block_size": 4, "lora_name": "sql-lora", "medium": "GPU",
             "extra_keys": [["sql-lora", [DIGEST, 2], "tenant-7"], ["sql-lora", ["img-b", -3]]]}], 1]),
    ("vllm_array_bare_identifier",
     "array store, 12 elements, extra_keys [[digest], nil] (old engines' bare identifiers)",
     [1.5, [["BlockStored", [31, 32], None, list(range(8)), 4, None, "GPU", None, [[DIGEST], None], 0,
             "full_attention", None]], 0]),
    ("mixed_batch_with_unknown_tag",
     "map store, unknown array event FutureEvent, map BlockRemoved with an unknown key and medium CPU, array AllBlocksCleared",
     [3.0, [{"type": "BlockStored", "block_hashes": [41], "token_ids": [1, 2, 3, 4], "block_size": 4, "new_field": [1, 2]},
            ["FutureEvent", 1, 2],
            {"type": "BlockRemoved", "block_hashes": [41], "medium": "CPU", "something_new": 1},
            ["AllBlocksCleared"]], 2]),
    ("map_envelope",
     "map envelope {ts: 4.0, events: [BlockRemoved [7]], data_parallel_rank: 3}",
     {"ts": 4.0, "events": [["BlockRemoved", [7], "GPU"]], "data_parallel_rank": 3}),
    ("trailing_elements",
     "array store with 14 elements (2 unknown trailing), BlockRemoved with 5 elements",
     [1.5, [["BlockStored", [51], None, [1, 2, 3, 4], 4, None, "GPU", None, None, 0, "full_attention", None, "x", 9],
            ["BlockRemoved", [51], "GPU", 0, "extra"]], None]),
    ("other_tier_store",
     "array store on medium CPU_PINNED (SGLang host tier), hash 61",
     [1.5, [["BlockStored", [61], None, [1, 2, 3, 4], 4, None, "CPU_PINNED"]], 0]),
    ("bin_parent_hash",
     "map store with a 16-byte bin hash and a 16-byte bin parent",
     [1.5, [{"type": "BlockStored", "block_hashes": [bytes(range(16))], "parent_block_hash": bytes(range(16, 32)),
             "token_ids": [1, 2, 3, 4], "block_size": 4}], 0]),
    ("malformed_event_in_good_batch",
     "a store whose block_hashes is a string, then a valid BlockRemoved [8]",
     [1.5, [["BlockStored", "oops", None, [1, 2, 3, 4], 4], ["BlockRemoved", [8]]], 0]),
]
print("# name\tdescription\tpayload_hex")
for name, description, value in cases:
    print(f"{name}\t{description}\t{msgpack.packb(value, use_bin_type=True).hex()}")

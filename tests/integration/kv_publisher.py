"""An engine-shaped KV-event publisher for tests: a random prefix cache whose changes are
published over ZeroMQ exactly as vLLM / SGLang publish them (docs/kv-events.md), with a ROUTER
replay socket, deliberate drops and restarts, and the router's block hashes computed for every
cached block (the ground truth the router's index must equal).

Run with /usr/bin/python3 (Debian's python3-zmq, python3-msgpack, python3-xxhash)."""
import random
import struct
import threading
import time

import msgpack
import xxhash
import zmq

SEED = 1337
END_MARKER = b"\xff" * 8


def local_hash(tokens):
    return xxhash.xxh3_64_intdigest(struct.pack(f"<{len(tokens)}I", *tokens), seed=SEED)


def chain(parent_seq, local):
    return xxhash.xxh3_64_intdigest(struct.pack("<QQ", parent_seq, local), seed=SEED)


class Engine:
    """One engine (or DP rank): its cache, its publisher and its replay socket.

    encoding: "vllm-array" (int64 hashes, 12-element stores, 3-frame replay replies) or
    "vllm-map" (32-byte bin hashes, map events, 4-frame replay replies with the topic)."""

    def __init__(self, context, encoding, block_size, topic=b"", rng_seed=0, forgetful_replay=False, replay_limit=None):
        self.encoding = encoding
        self.block_size = block_size
        self.topic = topic
        self.rng = random.Random(rng_seed)
        self.pub = context.socket(zmq.PUB)
        self.pub.setsockopt(zmq.SNDHWM, 100000)
        self.port = self.pub.bind_to_random_port("tcp://127.0.0.1")
        self.router = context.socket(zmq.ROUTER)
        self.replay_port = self.router.bind_to_random_port("tcp://127.0.0.1")
        self.lock = threading.Lock()
        self.buffer = []  # (seq, payload) since the last restart
        self.seq = 0
        self.cache = {}  # engine hash -> router sequence hash (GPU tier only)
        self.dropped = 0
        self.stop = False
        self.replay_requests = 0
        self.forgetful_replay = forgetful_replay  # every replay answers with only the end marker
        # Answers at most this many batches per replay and drops the rest with the end marker,
        # as a ROUTER socket does past its send high-water mark (vLLM's, 1000 by default).
        self.replay_limit = replay_limit
        self.replay_thread = threading.Thread(target=self._serve_replay, daemon=True)
        self.replay_thread.start()

    # -- the engine's cache -------------------------------------------------------------------
    def _new_hash(self):
        if self.encoding == "vllm-map":
            return self.rng.randbytes(32)
        return self.rng.randint(-(2 ** 63), 2 ** 63 - 1)

    def _store(self):
        parent = None
        parent_seq = None
        if self.cache and self.rng.random() < 0.7:
            parent = self.rng.choice(list(self.cache))
            parent_seq = self.cache[parent]
        hashes, tokens = [], []
        for _ in range(self.rng.randint(1, 4)):
            block = [self.rng.randrange(150000) for _ in range(self.block_size)]
            local = local_hash(block)
            seq = local if parent_seq is None and not hashes else chain(parent_seq, local)
            h = self._new_hash()
            hashes.append(h)
            tokens.extend(block)
            self.cache[h] = seq
            parent_seq = seq
        return self._stored_event(hashes, parent, tokens, "GPU")

    def _stored_event(self, hashes, parent, tokens, medium):
        if self.encoding == "vllm-map":
            return {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": parent,
                    "token_ids": tokens, "block_size": self.block_size, "medium": medium,
                    "extra_keys": [None] * len(hashes), "group_idx": 0, "kv_cache_spec_kind": "full_attention"}
        return ["BlockStored", hashes, parent, tokens, self.block_size, None, medium, None,
                [None] * len(hashes), 0, "full_attention", None]

    def _remove(self):
        victims = self.rng.sample(list(self.cache), min(len(self.cache), self.rng.randint(1, 3)))
        for v in victims:
            del self.cache[v]
        if self.encoding == "vllm-map":
            return {"type": "BlockRemoved", "block_hashes": victims, "medium": "GPU"}
        return ["BlockRemoved", victims, "GPU", 0]

    def _other_tier(self):
        # Offloaded copies on the CPU tier: published, but not in the GPU prefix index.
        tokens = [self.rng.randrange(150000) for _ in range(self.block_size)]
        return self._stored_event([self._new_hash()], None, tokens, "CPU")

    # -- publishing -----------------------------------------------------------------------------
    def publish_step(self, drop=False):
        events = []
        for _ in range(self.rng.randint(1, 3)):
            r = self.rng.random()
            if not self.cache or r < 0.6:
                events.append(self._store())
            elif r < 0.9:
                events.append(self._remove())
            else:
                events.append(self._other_tier())
        payload = msgpack.packb([time.time(), events, 0], use_bin_type=True)
        seq = self.seq
        self.seq += 1
        with self.lock:
            self.buffer.append((seq, payload))
        if drop:
            self.dropped += 1
        else:
            self.pub.send_multipart([self.topic, struct.pack(">Q", seq), payload])

    def restart(self):
        """The engine process restarts: sequence back to 0, empty cache, empty replay buffer."""
        with self.lock:
            self.buffer = []
        self.seq = 0
        self.cache = {}

    def truth(self):
        return sorted(self.cache.values())

    # -- replay ---------------------------------------------------------------------------------
    def _serve_replay(self):
        poller = zmq.Poller()
        poller.register(self.router, zmq.POLLIN)
        while not self.stop:
            if not poller.poll(50):
                continue
            identity, _empty, start = self.router.recv_multipart()
            self.replay_requests += 1
            start = struct.unpack(">Q", start)[0]
            with self.lock:
                batches = [] if self.forgetful_replay else [(s, p) for s, p in self.buffer if s >= start]
            cut_short = self.replay_limit is not None and len(batches) > self.replay_limit
            for s, p in batches[:self.replay_limit]:
                frames = [identity, b"", struct.pack(">Q", s), p]
                if self.encoding == "vllm-map":
                    frames.insert(2, self.topic)
                self.router.send_multipart(frames)
            if not cut_short:
                self.router.send_multipart([identity, b"", END_MARKER, b""])

    def close(self):
        self.stop = True
        self.replay_thread.join()
        self.pub.close(0)
        self.router.close(0)

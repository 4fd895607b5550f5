#!/usr/bin/python3
"""Multimodal routing, and the gate that skips it where it cannot pay off.

Two worker sets on the same fake workers, from one config file: "vl" scores prefix overlap
(approximate kv mode, a Qwen2-VL-style template and card), "vl-lb" is the load-aware preset.
Chats carry PNG images as data URIs (made here, real files). In "vl" the same prompt with the
same image overlaps in full, with another image only up to the image, and each image costs its
Qwen2-VL placeholder count; in "vl-lb" the same requests cause no image work at all (counters
at zero) and are proxied untouched. A request whose image cannot be resolved still routes, on
its text before the image.

usage: mm_routing_test.py KVROUTER_BINARY
"""
import base64
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

from router_harness import Failures, Router, Worker

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TOKENIZER = os.path.join(REPO, ".cache", "tokenizers", "qwen3", "tokenizer.json")
TEMPLATE = os.path.join(REPO, "tests", "data", "chat_templates", "qwen2_vl_style.jinja")
IMAGE_PAD = 151655
BLOCK = 16


def png(width, height, shade):
    """A real RGB PNG of one colour."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    row = b"\x00" + bytes([shade, 255 - shade, 128]) * width
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(row * height)) + chunk(b"IEND", b""))


def data_uri(image):
    return "data:image/png;base64," + base64.b64encode(image).decode()


SYSTEM = "You describe photographs of umbrellas for an insurance claims desk, precisely and briefly. " * 4


def chat(model, image_url, question="What is damaged here?"):
    return {"model": model, "messages": [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": [{"type": "text", "text": "Claim 1182."},
                                     {"type": "image_url", "image_url": {"url": image_url}},
                                     {"type": "text", "text": question}]}]}


def rendered_ids(kvrouter, request):
    run = subprocess.run([kvrouter, "render-chat", "--tokenizer-config", TEMPLATE, "--tokenize", "--tokenizer", TOKENIZER],
                         input=json.dumps(request), capture_output=True, text=True, check=True)
    return json.loads(run.stdout)


def main():
    kvrouter = sys.argv[1]
    f = Failures()
    workers = [Worker(f"w{i}") for i in range(3)]
    card = {"image_token_id": IMAGE_PAD, "token_count": {"rule": "qwen2-vl", "patch_size": 14, "merge_size": 2}}
    sets = []
    for name, router_config in [("vl", {"router_mode": "kv", "use_kv_events": False}),
                                ("vl-lb", {"router_mode": "kv", "overlap_score_credit": 0.0, "use_kv_events": False})]:
        sets.append({"name": name, "model": name, "block_size": BLOCK, "tokenizer": TOKENIZER, "tokenizer_config": TEMPLATE,
                     "multimodal": card, "workers": [{"id": w.name, "url": w.url} for w in workers],
                     "router_config": router_config})
    config = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump({"router": {}, "worker_sets": sets}, config)
    config.close()
    router = Router(kvrouter, None, [], "--config", config.name, "--health-interval-ms", "0")
    dry = {"x-kvrouter-dry-run": "1"}
    a, b = data_uri(png(224, 224, 10)), data_uri(png(448, 224, 200))
    try:
        status, _, body = router.request("POST", "/v1/chat/completions", chat("vl", a))
        f.check(status == 200, "a chat with a data-URI image is proxied")
        ids = rendered_ids(kvrouter, chat("vl", a))
        text_before_image = ids.index(IMAGE_PAD)
        a_tokens = (224 // 28) * (224 // 28)  # 64 placeholder tokens
        _, _, body = router.request("POST", "/v1/chat/completions", chat("vl", a), dry)
        same = json.loads(body)
        f.check(same["prompt_tokens"] == len(ids) - 1 + a_tokens,
                f"the image's placeholder becomes its {a_tokens} tokens ({same['prompt_tokens']} == {len(ids) - 1 + a_tokens})")
        f.check(same["overlap_blocks"] == same["prompt_tokens"] // BLOCK,
                f"the same prompt with the same image overlaps in full ({same['overlap_blocks']} blocks)")
        _, _, body = router.request("POST", "/v1/chat/completions", chat("vl", b), dry)
        other = json.loads(body)
        f.check(other["overlap_blocks"] == text_before_image // BLOCK,
                f"another image overlaps only up to the image ({other['overlap_blocks']} == {text_before_image // BLOCK} blocks)")
        f.check(other["prompt_tokens"] == len(ids) - 1 + (448 // 28) * (224 // 28), "a wider image takes more tokens")

        status, _, body = router.request("POST", "/v1/chat/completions", chat("vl", "http://127.0.0.1:9/cat.png"), dry)
        fallback = json.loads(body)
        f.check(status == 200 and fallback["prompt_tokens"] == text_before_image,
                "an image URL (no fetcher yet) routes on the text before it")
        status, _, _ = router.request("POST", "/v1/chat/completions", chat("vl", "data:image/png;base64,bm90IGFuIGltYWdl"))
        f.check(status == 200, "a data URI that is not an image still gets its request proxied")

        # The gated-off set: the same requests, no image work.
        for image in (a, b, a):
            status, _, _ = router.request("POST", "/v1/chat/completions", chat("vl-lb", image))
            f.check(status == 200, "the load-aware set proxies image chats")
        forwarded = [json.loads(body_) for w in workers for body_ in w.stats()["bodies"]]
        f.check(any(m.get("model") == "vl-lb" and m["messages"][1]["content"][1]["image_url"]["url"] == a for m in forwarded),
                "the worker receives the image untouched")

        metrics = router.metrics()
        def counter(name, model):
            return metrics.get(f'kvrouter_{name}{{set="{model}",model="{model}"}}', -1)
        f.check(counter("set_images_resolved_total", "vl") == 3 and counter("set_image_bytes_hashed_total", "vl") > 0,
                f"vl resolved and hashed its 3 images ({counter('set_images_resolved_total', 'vl')})")
        f.check(counter("set_image_fallbacks_total", "vl") == 2 and counter("set_image_urls_unresolved_total", "vl") == 1,
                "vl counted the URL and the broken image as text-only fallbacks")
        gated = [counter(n, "vl-lb") for n in ("set_images_resolved_total", "set_image_bytes_hashed_total",
                                                "set_image_fallbacks_total", "set_chats_rendered_total")]
        f.check(gated == [0, 0, 0, 0], f"vl-lb did no image work and rendered no template: {gated}")
        _, _, body = router.request("GET", "/v1/router/sets")
        pipelines = {s["name"]: s["pipeline"]["hashers"] for s in json.loads(body)["sets"]}
        f.check(pipelines["vl"] > 0 and pipelines["vl-lb"] == 0, f"only vl has hashers: {pipelines}")
    finally:
        router.stop()
        for w in workers:
            w.stop()
        os.unlink(config.name)
    f.exit()


if __name__ == "__main__":
    main()

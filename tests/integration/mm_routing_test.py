#!/usr/bin/python3
"""Multimodal routing, and the gate that skips it where it cannot pay off.

Two worker sets on the same fake workers, from one config file: "vl" scores prefix overlap
(approximate kv mode, a Qwen2-VL-style template and card), "vl-lb" is the load-aware preset.
Chats carry PNG images as data URIs (made here, real files). In "vl" the same prompt with the
same image overlaps in full, with another image only up to the image, and each image costs its
Qwen2-VL placeholder count; in "vl-lb" the same requests cause no image work at all (counters
at zero) and are proxied untouched. A request whose image cannot be resolved still routes, on
its text before the image.

Image URLs are served by a loopback image server with Range support that counts requests:
dimensions come from a 4 KiB (then 64 KiB) range, are cached by URL, follow redirects (at most
3), and loopback URLs are refused unless --media-allow-private; the load-aware set never asks.

usage: mm_routing_test.py KVROUTER_BINARY
"""
import atexit
import base64
import http.server
import json
import threading
import os
import ssl
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


def jpeg_with_big_exif(width, height):
    """A JPEG whose frame header (SOF0) sits after a 10 KB APP1 segment: past the first 4 KiB."""
    app1 = b"\xff\xe1" + struct.pack(">H", 10002) + b"Exif\x00\x00" + b"\x00" * 9994
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    return b"\xff\xd8" + app1 + sof0 + b"\xff\xd9"


class ImageServer:
    """Serves images on loopback with Range support, counting requests per path."""

    def __init__(self, files):
        self.files, self.hits, self.ranges, self.connections = files, {}, [], 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as image hosts do

            def setup(self):
                outer.connections += 1
                super().setup()

            def log_message(self, *args):
                pass

            def do_GET(self):
                outer.hits[self.path] = outer.hits.get(self.path, 0) + 1
                if self.path == "/redirect":
                    return self._redirect("/a.png")
                if self.path == "/loop":
                    return self._redirect("/loop")
                data = outer.files.get(self.path)
                if data is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    return self.end_headers()
                wanted = self.headers.get("Range")
                outer.ranges.append(wanted)
                if wanted and wanted.startswith("bytes=0-"):
                    end = min(int(wanted[8:]), len(data) - 1)
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes 0-{end}/{len(data)}")
                    data = data[:end + 1]
                else:
                    self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _redirect(self, to):
                self.send_response(302)
                self.send_header("Location", to)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()


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
    atexit.register(lambda: [w.stop() for w in workers])  # even when a check raises: they hold ctest's pipe
    card = {"image_token_id": IMAGE_PAD, "token_count": {"rule": "qwen2-vl", "patch_size": 14, "merge_size": 2}}
    sets = []
    # The gate matrix: where prefix overlap is scored (kv, credit > 0, with or without KV events)
    # images are resolved; everywhere else nothing is done for them.
    gate_rows = [("vl", {"router_mode": "kv", "use_kv_events": False}, True),
                 ("vl-events", {"router_mode": "kv", "use_kv_events": True}, True),
                 ("vl-lb", {"router_mode": "kv", "overlap_score_credit": 0.0, "use_kv_events": False}, False),
                 ("vl-credit0-events", {"router_mode": "kv", "overlap_score_credit": 0.0, "use_kv_events": True}, False),
                 ("vl-rr", {"router_mode": "round-robin"}, False),
                 ("vl-random", {"router_mode": "random"}, False),
                 ("vl-p2", {"router_mode": "power-of-two"}, False),
                 ("vl-ll", {"router_mode": "least-loaded"}, False)]
    for name, router_config, _ in gate_rows:
        sets.append({"name": name, "model": name, "block_size": BLOCK, "tokenizer": TOKENIZER, "tokenizer_config": TEMPLATE,
                     "multimodal": card, "workers": [{"id": w.name, "url": w.url} for w in workers],
                     "router_config": router_config})
    config = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump({"router": {}, "worker_sets": sets}, config)
    config.close()
    images = ImageServer({"/a.png": png(224, 224, 10), "/b.png": png(448, 224, 200), "/big.jpg": jpeg_with_big_exif(560, 280),
                          "/gate.png": png(224, 224, 30)})
    router = Router(kvrouter, None, [], "--config", config.name, "--health-interval-ms", "0", "--media-allow-private")
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
                "an unreachable image URL routes on the text before it")

        # Image URLs: dimensions from a range request, cached by URL, hashed by URL.
        url_a = images.url + "/a.png"
        router.request("POST", "/v1/chat/completions", chat("vl", url_a))
        _, _, body = router.request("POST", "/v1/chat/completions", chat("vl", url_a), dry)
        again = json.loads(body)
        f.check(again["prompt_tokens"] == len(ids) - 1 + a_tokens and again["overlap_blocks"] == again["prompt_tokens"] // BLOCK,
                f"an image URL fetched for its size overlaps in full the second time ({again['overlap_blocks']} blocks)")
        f.check(images.hits.get("/a.png") == 1 and images.ranges[0] == "bytes=0-4095",
                f"the image server saw one range request for the first 4 KiB ({images.hits.get('/a.png')}, {images.ranges[:1]})")
        _, _, body = router.request("POST", "/v1/chat/completions", chat("vl", images.url + "/big.jpg"), dry)
        big = json.loads(body)
        f.check(big["prompt_tokens"] == len(ids) - 1 + (560 // 28) * (280 // 28) and images.hits.get("/big.jpg") == 2,
                "a JPEG whose header lies past 4 KiB is read with a second, 64 KiB range")
        _, _, body = router.request("POST", "/v1/chat/completions", chat("vl", images.url + "/redirect"), dry)
        f.check(json.loads(body)["prompt_tokens"] == len(ids) - 1 + a_tokens, "a redirect to an image is followed")
        _, _, body = router.request("POST", "/v1/chat/completions", chat("vl", images.url + "/loop"), dry)
        f.check(json.loads(body)["prompt_tokens"] == text_before_image and images.hits.get("/loop") == 4,
                f"a redirect loop stops after 3 redirects and falls back ({images.hits.get('/loop')} requests)")
        status, _, _ = router.request("POST", "/v1/chat/completions", chat("vl", "data:image/png;base64,bm90IGFuIGltYWdl"))
        f.check(status == 200, "a data URI that is not an image still gets its request proxied")

        # The gated-off set: the same requests, no image work.
        for image in (a, b, images.url + "/gate.png"):
            status, _, _ = router.request("POST", "/v1/chat/completions", chat("vl-lb", image))
            f.check(status == 200, "the load-aware set proxies image chats")
        f.check("/gate.png" not in images.hits, "the load-aware set never fetches an image URL")
        forwarded = [json.loads(body_) for w in workers for body_ in w.stats()["bodies"]]
        f.check(any(m.get("model") == "vl-lb" and m["messages"][1]["content"][1]["image_url"]["url"] == a for m in forwarded),
                "the worker receives the image untouched")

        metrics = router.metrics()
        def counter(name, model):
            return metrics.get(f'kvrouter_{name}{{set="{model}",model="{model}"}}', -1)
        f.check(counter("set_images_resolved_total", "vl") == 7 and counter("set_image_bytes_hashed_total", "vl") > 0,
                f"vl resolved its 7 images ({counter('set_images_resolved_total', 'vl')})")
        f.check(counter("set_image_fallbacks_total", "vl") == 3, "vl counted the unreachable URL, the broken image and the loop")
        f.check(images.connections < counter("set_media_fetches_total", "vl") - 1,
                f"range requests to one host reuse kept-alive connections ({images.connections} connections for "
                f"{counter('set_media_fetches_total', 'vl') - 1} requests)")
        f.check(counter("set_media_lookups_total", "vl") == 6 and counter("set_media_cache_hits_total", "vl") == 1
                and counter("set_media_fetches_total", "vl") == 9 and counter("set_media_failures_total", "vl") == 2,
                "vl's media counters: 6 lookups, 1 cache hit, 9 range requests (2 ranges, 1+4 redirect hops), 2 failures")
        gated = [counter(n, "vl-lb") for n in ("set_images_resolved_total", "set_image_bytes_hashed_total",
                                                "set_image_fallbacks_total", "set_chats_rendered_total",
                                                "set_media_lookups_total", "set_media_fetches_total")]
        f.check(gated == [0, 0, 0, 0, 0, 0], f"vl-lb did no image work, rendered no template, fetched nothing: {gated}")
        _, _, body = router.request("GET", "/v1/router/sets")
        pipelines = {s["name"]: (s["pipeline"]["hashers"], s["pipeline"]["media_fetcher"]) for s in json.loads(body)["sets"]}
        f.check(all((p[0] > 0 and p[1]) == on for (name, _, on), p in zip(gate_rows, [pipelines[r[0]] for r in gate_rows])),
                f"hashers and a media fetcher exist only where the gate is on: {pipelines}")

        # Every row of the gate matrix, with its own image URL: fetched only where the gate is on.
        for name, _, mm_on in gate_rows[1:]:
            path = f"/gate-{name}.png"
            images.files[path] = png(224, 224, 77)
            status, _, _ = router.request("POST", "/v1/chat/completions", chat(name, images.url + path))
            metrics = router.metrics()
            work = [metrics.get(f'kvrouter_{n}{{set="{name}",model="{name}"}}', -1)
                    for n in ("set_media_fetches_total", "set_images_resolved_total")]
            hits = images.hits.get(path, 0)
            expected = ([1.0, 1.0], 1) if mm_on else ([0.0, 0.0], 0)
            f.check(status == 200 and (work, hits) == expected,
                    f"gate row {name}: image work {work}, image server hits {hits} (multimodal routing {'on' if mm_on else 'off'})")
    finally:
        router.stop()

    # https: the certificate is verified (against --media-ca-file here) and the host name checked.
    tls_dir = tempfile.mkdtemp()
    cert, key = os.path.join(tls_dir, "cert.pem"), os.path.join(tls_dir, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    secure = ImageServer({"/s.png": png(224, 224, 90)})
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    secure.server.socket = context.wrap_socket(secure.server.socket, server_side=True)
    secure_url = secure.url.replace("http://", "https://") + "/s.png"
    for trusted in (True, False):
        flags = ["--config", config.name, "--health-interval-ms", "0", "--media-allow-private"]
        if trusted:
            flags += ["--media-ca-file", cert]
        router = Router(kvrouter, None, [], *flags)
        try:
            _, _, body = router.request("POST", "/v1/chat/completions", chat("vl", secure_url), dry)
            tokens = json.loads(body)["prompt_tokens"]
            failures = router.metrics().get('kvrouter_set_media_failures_total{set="vl",model="vl"}')
            if trusted:
                f.check(tokens == len(ids) - 1 + a_tokens and failures == 0, "an https image URL is fetched over verified TLS")
            else:
                f.check(tokens == text_before_image and failures == 1,
                        "an https image whose certificate is not trusted is not used (text-only fallback)")
        finally:
            router.stop()
    secure.stop()

    # Without --media-allow-private, loopback image URLs are refused (SSRF) and never fetched.
    router = Router(kvrouter, None, [], "--config", config.name, "--health-interval-ms", "0")
    try:
        before = images.hits.get("/b.png", 0)
        _, _, body = router.request("POST", "/v1/chat/completions", chat("vl", images.url + "/b.png"), dry)
        metrics = router.metrics()
        f.check(json.loads(body)["prompt_tokens"] == text_before_image and images.hits.get("/b.png", 0) == before
                and metrics.get('kvrouter_set_media_refusals_total{set="vl",model="vl"}') == 1,
                "by default a loopback image URL is refused, counted, and the request routes on its text")
    finally:
        router.stop()
        images.stop()
        for w in workers:
            w.stop()
        os.unlink(config.name)
    f.exit()


if __name__ == "__main__":
    main()

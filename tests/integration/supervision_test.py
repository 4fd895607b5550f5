#!/usr/bin/python3
"""Integration: every pipeline component is supervised. With --fault-injection, each of the
KV subscriber, health checker, media fetcher, scorer and a hasher is killed as a crash would
kill it; the set reports it down (degraded) in /v1/router/sets, the watcher restarts it after
the back-off, the restart is counted, and the component does its job again: KV events reach
the index, health verdicts reach routing, image URLs are fetched, requests are routed.
Usage: supervision_test.py PATH/TO/kvrouter"""
import http.server
import json
import os
import struct
import sys
import threading
import time
import zlib

import msgpack
import zmq

from router_harness import Failures, Router, Worker

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TOKENIZER = os.path.join(REPO, ".cache", "tokenizers", "qwen3", "tokenizer.json")
TEMPLATE = os.path.join(REPO, "tests", "data", "chat_templates", "qwen2_vl_style.jinja")
BACKOFF_MS = 1500

kvrouter = sys.argv[1]
f = Failures()


def png(width, height):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress((b"\x00" + b"\x80" * 3 * width) * height)) + chunk(b"IEND", b""))


class Images(http.server.BaseHTTPRequestHandler):
    """Any path is a 56x56 PNG (so each new path is a new URL to fetch)."""
    def log_message(self, *_):
        pass

    def do_GET(self):
        data = png(56, 56)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def wait_for(condition, timeout, step=0.02):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(step)
    return None


def set_view(router):
    return json.loads(router.request("GET", "/v1/router/sets")[2])["sets"][0]["pipeline"]


def kill(router, component):
    return router.request("POST", "/v1/router/faults", {"set": "m", "component": component})[0]


def metric(router, name, **labels):
    key = name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
    return router.metrics().get(key)


context = zmq.Context()
pub = context.socket(zmq.PUB)
kv_port = pub.bind_to_random_port("tcp://127.0.0.1")
images = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Images)
threading.Thread(target=images.serve_forever, daemon=True).start()
worker = Worker("w0")
router = Router(kvrouter, "m", [f"{worker.url},id=w0,kv_events=tcp://127.0.0.1:{kv_port}"], "--block-size", "16",
                "--tokenizer", TOKENIZER, "--tokenizer-config", TEMPLATE, "--image-token-id", "151655",
                "--media-allow-private", "--health-interval-ms", "100", "--health-failures", "1",
                "--fault-injection", "--restart-backoff-ms", str(BACKOFF_MS))
sequence = 0


def kv_reaches_the_index(first_token):
    """Publishes 4 blocks of new tokens; true once a dry run finds them cached on w0."""
    global sequence
    tokens = list(range(first_token, first_token + 64))
    stored = ["BlockStored", [first_token + i for i in range(4)], None, tokens, 16, None, "GPU"]

    def overlap():
        global sequence
        pub.send_multipart([b"", struct.pack(">Q", sequence), msgpack.packb([time.time(), [stored], 0])])
        sequence += 1
        _, _, body = router.request("POST", "/v1/completions", {"model": "m", "prompt": tokens + [1, 2]},
                                    {"x-kvrouter-dry-run": "1"})
        return json.loads(body).get("overlap_blocks") == 4
    return wait_for(overlap, 5, step=0.1)


def image_url_is_fetched(name):
    before = metric(router, "kvrouter_set_media_fetches_total", set="m", model="m") or 0
    body = {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": f"http://127.0.0.1:{images.server_address[1]}/{name}.png"}},
        {"type": "text", "text": "what is this?"}]}]}
    status = router.request("POST", "/v1/chat/completions", body)[0]
    return status == 200 and wait_for(lambda: metric(router, "kvrouter_set_media_fetches_total", set="m", model="m") > before, 3)


def engine_metrics_reach_routing():
    worker.set_metrics('vllm:num_requests_waiting{engine="0"} 0\nvllm:num_requests_running{engine="0"} 1\n')
    before = metric(router, "kvrouter_set_engine_scrapes_total", set="m", model="m")
    return bool(wait_for(lambda: metric(router, "kvrouter_set_engine_scrapes_total", set="m", model="m") > before, 5))


def health_verdicts_reach_routing():
    worker.set_health(500)
    down = wait_for(lambda: router.worker_gauge("kvrouter_worker_healthy", "w0") == 0, 5)
    worker.set_health(200)
    up = wait_for(lambda: router.worker_gauge("kvrouter_worker_healthy", "w0") == 1, 5)
    return down and up


try:
    f.check(kv_reaches_the_index(1000), "before any fault, KV events reach the index")
    f.check(image_url_is_fetched("before"), "... and image URLs are fetched")
    view = set_view(router)
    f.check(all(c["running"] and c["restarts"] == 0 for c in view["components"].values()) and not view["degraded"],
            f"every component runs, none restarted ({view['components']})")
    f.check(sorted(view["components"]) == ["engine_scraper", "health_checker", "kv_subscriber", "media_fetcher"],
            "the set supervises its KV subscriber, health checker, engine-metrics scraper and media fetcher")

    checks = {"kv_subscriber": lambda: kv_reaches_the_index(5000),
              "health_checker": health_verdicts_reach_routing,
              "engine_scraper": engine_metrics_reach_routing,
              "media_fetcher": lambda: image_url_is_fetched("after")}
    for component, works in checks.items():
        f.check(kill(router, component) == 202, f"{component}: the fault is accepted")
        degraded = wait_for(lambda: set_view(router)["degraded"] and not set_view(router)["components"][component]["running"], 1.2)
        f.check(bool(degraded), f"{component}: the set reports it down (degraded) until its restart")
        back = wait_for(lambda: (lambda c: c["running"] and c["restarts"] == 1)(set_view(router)["components"][component]), 10)
        f.check(bool(back), f"{component}: the watcher restarts it after the back-off and counts the restart")
        f.check(metric(router, "kvrouter_component_restarts_total", set="m", model="m", component=component) == 1,
                f"{component}: /metrics counts the restart")
        f.check(not set_view(router)["degraded"], f"{component}: the set is no longer degraded")
        f.check(works(), f"{component}: it does its job again")

    for n, component in enumerate(["scorer", "hasher"], start=1):
        f.check(kill(router, component) == 202, f"{component}: the fault is accepted")
        restarted = wait_for(lambda: set_view(router)["set_restarts"] == n, 10)
        f.check(bool(restarted), f"{component}: its death restarts the set (restarts {set_view(router)['set_restarts']})")
        status, _, _ = router.chat(content="hello after a restart")
        f.check(status == 200, f"{component}: requests are routed again after the restart (got {status})")
        f.check(kv_reaches_the_index(9000 + 1000 * n), f"{component}: the restarted set indexes KV events again")
    f.check(kill(router, "nothing") == 202 and set_view(router)["set_restarts"] == 2,
            "a fault naming no component changes nothing")
except Exception:
    # What kvrouter said before it went (an ASan report, a crash) is the clue: keep it.
    print(f"kvrouter exit status: {router.proc.poll()}; its log's end:\n{router.log[-8000:]}")
    raise
finally:
    router.stop()
    worker.stop()
    images.shutdown()
    pub.close(0)
    context.term()
f.exit()

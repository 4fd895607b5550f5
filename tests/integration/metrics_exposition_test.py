#!/usr/bin/python3
"""Integration: /metrics passes Prometheus's own checker, whatever the router has been through.

A router with two worker sets from a config file (kv over two kvrouter-mockers with KV events,
a tokenizer and a queue; round-robin over a fake worker and a dead one) serves chats, streams,
a client that leaves, bad requests, dry runs and a reload that adds and removes sets. After each
phase `promtool check metrics` (from Debian's prometheus package) must print nothing and exit 0,
and the series must be consistent: one HELP and TYPE per family (the harness checks), every
`kvrouter_worker_*` sample labelled exactly set, model, worker, every `kvrouter_set_*` sample
set and model, and no series of a removed set left behind. The mocker's own /metrics passes too.

Usage: metrics_exposition_test.py PATH/TO/kvrouter PATH/TO/kvrouter-mocker PATH/TO/promtool TOKENIZER_JSON
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

from router_harness import Failures, Mocker, Router, Worker, free_port, wait_for

kvrouter, mocker_binary, promtool, tokenizer = sys.argv[1:5]
f = Failures()
tmp = tempfile.mkdtemp()
LABEL_SETS = {"kvrouter_worker_": ["set", "model", "worker"], "kvrouter_set_": ["set", "model"],
              "kvrouter_component_": ["set", "model", "component"]}


def promtool_check(text, what, allowed=()):
    """promtool parses the text strictly and lints it; `allowed` names lint findings that are
    deliberate (vLLM's own names contain ':', which the lint reserves for recording rules)."""
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    findings = [line for line in (result.stdout + result.stderr).splitlines()
                if line.strip() and not any(a in line for a in allowed)]
    parsed = result.returncode == 0 or (allowed and result.returncode == 3)  # 3: lint findings only
    f.check(parsed and not findings, f"{what}: promtool check metrics is clean (exit {result.returncode}: {findings})")


def label_names(sample):
    inner = sample.split("{", 1)[1].rsplit("}", 1)[0] if "{" in sample else ""
    return re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"', inner)


def check_exposition(router, what):
    _, _, body = router.request("GET", "/metrics")
    promtool_check(body.decode(), what)
    samples = router.metrics()  # raises on a family declared twice or a sample outside a family
    odd = [s for s in samples for prefix, labels in LABEL_SETS.items()
           if s.startswith(prefix) and label_names(s) != labels]
    f.check(not odd, f"{what}: per-worker, per-set and per-component series carry their labels ({odd[:3]})")
    return samples


def write(path, document):
    with open(path + ".tmp", "w") as out:
        json.dump(document, out)
    os.replace(path + ".tmp", path)


def client_leaves_mid_stream(port):
    s = socket.create_connection(("127.0.0.1", port))
    body = json.dumps({"model": "mc", "stream": True, "max_tokens": 200,
                       "messages": [{"role": "user", "content": "a long answer please"}]})
    s.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
    s.recv(100)
    s.close()


mocker_flags = ["--model", "mc", "--tokenizer", tokenizer, "--speedup", "0.2"]
kv_ports = [free_port(), free_port()]
mockers = [Mocker(mocker_binary, *mocker_flags, "--kv-events-endpoint", f"tcp://*:{p}") for p in kv_ports]
worker = Worker("r0")
router = None
try:
    config = os.path.join(tmp, "sets.json")
    kv_set = {"name": "chat", "model": "mc", "tokenizer": tokenizer,
              "workers": [{"id": f"m{i}", "url": m.url, "kv_events": f"tcp://127.0.0.1:{p}"}
                          for i, (m, p) in enumerate(zip(mockers, kv_ports))],
              "router_config": {"router_mode": "kv", "busy_threshold": 4.0}}
    rr_set = {"name": "plain", "model": "mr", "workers": [{"id": "r0", "url": worker.url},
                                                          {"id": "dead", "url": f"http://127.0.0.1:{free_port()}"}],
              "router_config": {"router_mode": "round-robin"}}
    write(config, {"worker_sets": [kv_set, rr_set]})
    router = Router(kvrouter, None, [], "--config", config, "--access-log", os.path.join(tmp, "access.log"),
                    "--engine-metrics-interval-ms", "100", "--health-interval-ms", "0")
    check_exposition(router, "at start")

    for i in range(6):
        router.chat(model="mc", content=f"tell me about the number {i} " * 20)
        router.chat(model="mc", stream=True, content=f"stream about {i}")
        router.chat(model="mr", content=f"plain {i}")
    router.chat(model="mc", headers={"x-kvrouter-dry-run": "1"})
    router.chat(model="mc", headers={"x-kvrouter-priority": "urgent"})
    router.chat(model="nobody")
    router.request("POST", "/v1/chat/completions", b"{not json")
    client_leaves_mid_stream(router.port)
    wait_for(lambda: router.metrics().get("kvrouter_client_disconnects_total", 0) >= 1, 5)
    samples = check_exposition(router, "after traffic")
    f.check(samples.get('kvrouter_worker_failures_total{set="plain",model="mr",worker="dead"}', 0) >= 1 and
            samples.get('kvrouter_worker_index_blocks{set="chat",model="mc",worker="m0"}', 0) +
            samples.get('kvrouter_worker_index_blocks{set="chat",model="mc",worker="m1"}', 0) > 0 and
            samples.get("kvrouter_client_disconnects_total", 0) >= 1,
            "the traffic reached the series checked: a worker failure, indexed blocks, a client that left "
            f"({ {k: v for k, v in samples.items() if 'failures_total' in k or 'index_blocks' in k or 'disconnects' in k} })")

    write(config, {"worker_sets": [kv_set, {**rr_set, "name": "renamed", "model": "mr2"}]})
    wait_for(lambda: '{set="renamed"' in router.request("GET", "/metrics")[2].decode(), 10)
    router.chat(model="mr2")
    write(config, "not a config")
    router.wait_for_log("config change rejected")
    samples = check_exposition(router, "after a reload that renames a set and a rejected one")
    stale = [s for s in samples if 'set="plain"' in s]
    f.check(not stale and any('set="renamed"' in s for s in samples), f"the removed set's series are gone ({stale[:3]})")

    promtool_check(mockers[0].request("GET", "/metrics")[1].decode(), "kvrouter-mocker's /metrics (vLLM's names)",
                   allowed=("metric names should not contain ':'",))
    f.check(router.stop() == 0, "kvrouter stops cleanly")
finally:
    if router and router.proc.poll() is None:
        router.proc.kill()
    for m in mockers:
        m.stop()
    worker.stop()
f.exit()

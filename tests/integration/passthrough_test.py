#!/usr/bin/python3
"""Integration: the engines' whole API through kvrouter. Every route kvrouter does not serve
itself reaches a worker of the right set with its method, query string, headers and body as
sent, and its answer (streamed or not) comes back as the worker gave it.

Two sets of kvrouter-mockers (models "ma" and "mb", two workers each):
1. vLLM's and SGLang's routes (embeddings, responses, messages, rerank, score, pooling,
   classify, tokenize, detokenize, generate, audio transcriptions as a multipart upload, and
   PUT / DELETE / GET with query strings) reach a worker of the set the body names, the bytes
   intact (the mocker echoes what it got, with a hash of the body).
2. Without a model, with two sets: 400 naming the models; with one set, its workers take it.
3. Pass-through requests are load-aware: a worker already busy with a slow stream gets none
   of the next ones; they are booked and counted like chats.
4. SGLang's /generate routes on its prompt: after one request, the same token ids go to the
   worker that cached them (the dry-run decision shows the overlap). A request's booking is
   released before its client has the answer's last byte (its next request finds the worker
   free).
5. `x-kvrouter-worker: NAME` pins a request to a worker (an unknown name is 400, and the header
   is not forwarded); GET /v1/models/{id}.
6. Retries before the first byte apply: a dead worker's share goes to the other.

Usage: passthrough_test.py PATH/TO/kvrouter PATH/TO/kvrouter-mocker
"""
import http.client
import json
import sys
import threading
import time

import xxhash

from router_harness import Failures, Mocker, Router, free_port, wait_for

kvrouter, mocker_binary = sys.argv[1], sys.argv[2]
f = Failures()


def send(router, method, path, body=b"", headers=None, timeout=30):
    c = http.client.HTTPConnection("127.0.0.1", router.port, timeout=timeout)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, data


def send_json(router, method, path, document, headers=None):
    return send(router, method, path, json.dumps(document).encode(), {"Content-Type": "application/json", **(headers or {})})


def echoed(body):
    return json.loads(body).get("echo", {})


mockers = {name: Mocker(mocker_binary, "--model", name.split("-")[0], "--block-size", "16")
           for name in ("ma-0", "ma-1", "mb-0", "mb-1")}
router = None
try:
    import os
    import tempfile
    config = os.path.join(tempfile.mkdtemp(), "sets.json")
    with open(config, "w") as out:
        json.dump({"worker_sets": [
            {"name": f"set-{model}", "model": model, "block_size": 16,
             "workers": [{"id": name, "url": m.url} for name, m in mockers.items() if name.startswith(model)],
             "router_config": {"router_mode": "kv", "use_kv_events": False}}
            for model in ("ma", "mb")]}, out)
    router = Router(kvrouter, None, [], "--config", config, "--engine-metrics-interval-ms", "0")

    # 1. Routes and bytes.
    json_routes = ["/v1/rerank", "/rerank", "/score", "/pooling", "/classify", "/detokenize", "/v1/score"]
    for path in json_routes:
        document = {"model": "mb", "query": "q", "documents": ["a", "b"], "tokens": [1, 2], "x": "\u00e9\u6f22"}
        raw = json.dumps(document, ensure_ascii=False).encode()
        status, headers, body = send(router, "POST", path + "?trace=1&x=%2F", raw, {"Content-Type": "application/json",
                                                                                      "X-Custom": "kept"})
        e = echoed(body)
        f.check(status == 200 and headers.get("x-kvrouter-worker", "").startswith("mb-") and e.get("method") == "POST" and
                e.get("target") == path + "?trace=1&x=%2F" and e.get("body_xxh3") == xxhash.xxh3_64_hexdigest(raw) and
                e.get("headers", {}).get("x-custom") == "kept",
                f"POST {path} reaches a worker of set mb with its query and body intact ({status} {e})")
    status, headers, body = send_json(router, "POST", "/v1/embeddings", {"model": "ma", "input": ["one", "two"]})
    answer = json.loads(body)
    f.check(status == 200 and headers["x-kvrouter-worker"].startswith("ma-") and len(answer["data"]) == 2 and
            len(answer["data"][0]["embedding"]) == 8, f"/v1/embeddings answers from set ma ({status} {body[:120]})")
    status, _, body = send_json(router, "POST", "/v1/responses", {"model": "ma", "input": "hi"})
    f.check(status == 200 and json.loads(body)["object"] == "response", "/v1/responses answers")
    status, headers, body = send_json(router, "POST", "/v1/responses", {"model": "ma", "input": "hi", "stream": True})
    f.check(status == 200 and headers.get("content-type") == "text/event-stream" and b"event: response.completed" in body,
            "/v1/responses streams its events through")
    status, _, body = send_json(router, "POST", "/v1/messages", {"model": "mb", "max_tokens": 4,
                                                                "messages": [{"role": "user", "content": "hi"}]})
    f.check(status == 200 and json.loads(body)["type"] == "message", "/v1/messages answers")
    status, _, body = send_json(router, "POST", "/tokenize", {"model": "mb", "prompt": "a b c"})
    f.check(status == 200 and json.loads(body)["count"] == 3, f"/tokenize reaches the engine ({body[:100]})")
    boundary = "kvrBoundary42"
    upload = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n"
              f"Content-Type: audio/wav\r\n\r\n").encode() + bytes(range(256)) * 4 + \
             f"\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nmb\r\n--{boundary}--\r\n".encode()
    status, headers, body = send(router, "POST", "/v1/audio/transcriptions", upload,
                                 {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    e = echoed(body)
    f.check(status == 200 and headers["x-kvrouter-worker"].startswith("mb-") and
            e.get("body_xxh3") == xxhash.xxh3_64_hexdigest(upload) and e.get("body_bytes") == len(upload),
            f"a multipart upload goes to the set its model field names, its binary bytes intact ({status} {e.get('body_bytes')})")
    for method in ("PUT", "DELETE", "PATCH"):
        status, headers, body = send_json(router, method, "/v1/files/abc?purpose=x", {"model": "ma"})
        f.check(status == 200 and echoed(body).get("method") == method and echoed(body).get("target") == "/v1/files/abc?purpose=x",
                f"{method} passes through as {method} ({status})")

    # 2. No model.
    status, _, body = send(router, "GET", "/v1/files?limit=2")
    error = json.loads(body).get("error", {})
    f.check(status == 400 and "give \"model\"" in error.get("message", "") and "ma" in error["message"] and "mb" in error["message"],
            f"with two sets, a request naming no model is 400 naming the models ({status} {error})")
    status, _, body = send(router, "POST", "/v1/embeddings", b"{not json", {"Content-Type": "application/json"})
    f.check(status == 400 and json.loads(body)["error"]["code"] == "invalid_json", "and an unreadable body is 400 invalid_json")
    status, _, body = send_json(router, "POST", "/v1/embeddings", {"model": "nope", "input": "x"})
    f.check(status == 404 and json.loads(body)["error"]["code"] == "model_not_found", "an unknown model is 404 model_not_found")

    # 5. Pinning, /v1/models/{id}.
    picks = {send_json(router, "POST", "/v1/embeddings", {"model": "ma", "input": "x"}, {"x-kvrouter-worker": "ma-1"})[1]
             ["x-kvrouter-worker"] for _ in range(5)}
    f.check(picks == {"ma-1"}, f"x-kvrouter-worker pins requests to that worker ({picks})")
    status, _, body = send_json(router, "POST", "/pin/check", {"model": "ma"}, {"x-kvrouter-worker": "ma-0", "x-other": "1"})
    arrived = echoed(body).get("headers", {})
    f.check(status == 200 and echoed(body)["target"] == "/pin/check" and arrived.get("x-other") == "1" and
            "x-kvrouter-worker" not in arrived and arrived.get("x-request-id", "").startswith("kvr-"),
            f"a pinned request arrives with its own headers and a request id, without the pin ({arrived})")
    status, _, body = send_json(router, "POST", "/v1/embeddings", {"model": "ma", "input": "x"}, {"x-kvrouter-worker": "mb-0"})
    f.check(status == 400 and "no worker \"mb-0\"" in json.loads(body)["error"]["message"],
            "a worker of another set cannot be pinned (400 naming it)")
    status, _, body = send(router, "GET", "/v1/models/mb")
    f.check(status == 200 and json.loads(body)["id"] == "mb", "GET /v1/models/{id} answers the model")
    status, _, body = send(router, "GET", "/v1/models/zz")
    f.check(status == 404, "and 404 for one not served")

    # 3. Load-aware: while ma-0 streams a long answer, the next pass-through requests go to ma-1.
    def slow_stream():  # cut when the router stops at the end
        try:
            stream_long()
        except (http.client.HTTPException, OSError):
            pass

    def stream_long():
        send_json(router, "POST", "/v1/chat/completions", {"model": "ma", "stream": True, "max_tokens": 4000,
                                                           "messages": [{"role": "user", "content": "long " * 50}]},
                  {"x-kvrouter-worker": "ma-0"})
    slow = threading.Thread(target=slow_stream, daemon=True)
    slow.start()
    busy = wait_for(lambda: router.metrics().get('kvrouter_worker_active_requests{set="set-ma",model="ma",worker="ma-0"}', 0) >= 1, 5)
    picks = [send_json(router, "POST", "/v1/embeddings", {"model": "ma", "input": "x" * 2000})[1]["x-kvrouter-worker"]
             for _ in range(4)]
    f.check(bool(busy) and picks == ["ma-1"] * 4, f"pass-through requests avoid the worker busy with a stream ({picks})")
    routed = router.metrics()
    f.check(routed['kvrouter_worker_routed_total{set="set-ma",model="ma",worker="ma-1"}'] >= 4,
            "and are booked and counted per worker")

    # 4. /generate routes on its prompt.
    ids = list(range(5000, 5000 + 64))
    status, headers, _ = send_json(router, "POST", "/generate", {"model": "mb", "input_ids": ids,
                                                                 "sampling_params": {"max_new_tokens": 1}})
    first = headers.get("x-kvrouter-worker")
    status, _, body = send_json(router, "POST", "/generate", {"model": "mb", "input_ids": [ids, [1, 2]]},
                                {"x-kvrouter-dry-run": "1"})
    decision = json.loads(body)
    f.check(status == 200 and decision["worker"] == first and decision["overlap_blocks"] == 4 and decision["prompt_blocks"] == 4,
            f"/generate's token ids route to the worker that took them before (batched: the first) ({first}: {decision})")
    status, _, body = send_json(router, "POST", "/generate", {"model": "mb", "text": "hello"}, {"x-kvrouter-dry-run": "1"})
    f.check(status == 200 and json.loads(body)["prompt_tokens"] > 0, "a /generate text prompt is read too")

    # A request's booking is released before its client has the last byte of the answer: a
    # dry run sent right after the answer finds every worker idle (streamed or not, chat or
    # pass-through).
    leftovers = []
    for i in range(30):
        if i % 3 == 2:
            send_json(router, "POST", "/v1/rerank", {"model": "mb", "query": f"q{i}", "documents": ["a"]})
        else:
            send_json(router, "POST", "/v1/chat/completions", {"model": "mb", "max_tokens": 8, "stream": i % 3 == 0,
                                                               "messages": [{"role": "user", "content": f"turn {i}"}]})
        _, _, body = send_json(router, "POST", "/v1/chat/completions",
                               {"model": "mb", "messages": [{"role": "user", "content": "probe"}]}, {"x-kvrouter-dry-run": "1"})
        leftovers += [(i, c) for c in json.loads(body)["candidates"] if c["active_prefill_tokens"] or c["active_decode_blocks"]]
    f.check(not leftovers, f"a finished request's booking is gone before its client has the answer ({leftovers[:3]})")

    # 6. A dead worker: its requests are retried on the other before any byte went out.
    mockers["mb-1"].stop()
    statuses = [send_json(router, "POST", "/v1/rerank", {"model": "mb", "query": "q"})[0] for _ in range(6)]
    f.check(statuses == [200] * 6, f"with mb-1 gone, its pass-through requests are retried on mb-0 ({statuses})")
    slow.join(timeout=0.1)
    f.check(router.stop() == 0, "kvrouter stops cleanly")
finally:
    if router and router.proc.poll() is None:
        router.proc.kill()
    for m in mockers.values():
        if m.proc.poll() is None:
            m.stop()
f.exit()

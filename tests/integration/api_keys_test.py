#!/usr/bin/python3
"""Integration: API keys. With --api-key / --api-key-file every route but /health, /ready and the
status page's HTML needs `Authorization: Bearer KEY`; --admin-api-key guards /metrics and
/v1/router/* on its own; the key file is re-read when it changes; keys never reach a worker
(unless --forward-authorization) and are never logged.

Usage: api_keys_test.py PATH/TO/kvrouter
"""
import json
import os
import subprocess
import sys
import tempfile
import time

from router_harness import Failures, Router, Worker, wait_for

kvrouter = sys.argv[1]
f = Failures()
tmp = tempfile.mkdtemp()
key_file = os.path.join(tmp, "keys.txt")
access_log = os.path.join(tmp, "access.log")
KEYS = ["sk-flag-123", "sk-file-456", "sk-rotated-789", "adm-000"]


def write_keys(text):
    with open(key_file + ".tmp", "w") as out:
        out.write(text)
    os.replace(key_file + ".tmp", key_file)


def bearer(key):
    return {"Authorization": f"Bearer {key}"}


def status_of(router, method, path, headers=None, body=None):
    return router.request(method, path, body, headers)[0]


def error_code(router, path, headers):
    status, _, body = router.request("POST", path, {"model": "m", "messages": [{"role": "user", "content": "x"}]}, headers)
    return status, json.loads(body).get("error", {}).get("code")


worker = Worker("w0")
router = None
try:
    write_keys("# the team's keys\nsk-file-456\n")
    router = Router(kvrouter, "m", [worker.url], "--api-key", "sk-flag-123", "--api-key-file", key_file,
                    "--admin-api-key", "adm-000", "--access-log", access_log)
    f.check(error_code(router, "/v1/chat/completions", {}) == (401, "invalid_api_key"),
            "a chat without a key is 401 invalid_api_key")
    f.check(error_code(router, "/v1/chat/completions", bearer("sk-wrong")) == (401, "invalid_api_key"),
            "with a wrong key too")
    f.check(error_code(router, "/v1/chat/completions", {"Authorization": "Basic c2stZmxhZy0xMjM="}) == (401, "invalid_api_key"),
            "a key in another scheme is not taken")
    f.check(router.chat(headers=bearer("sk-flag-123"))[0] == 200, "a key given by flag is accepted")
    f.check(router.chat(headers=bearer("sk-file-456"))[0] == 200, "a key from the file too")
    f.check(status_of(router, "POST", "/v1/embeddings", None, {"model": "m", "input": "x"}) == 401 and
            status_of(router, "POST", "/v1/embeddings", bearer("sk-flag-123"), {"model": "m", "input": "x"}) == 200,
            "pass-through routes need the key as well")
    f.check(status_of(router, "GET", "/v1/models") == 401 and status_of(router, "GET", "/v1/models", bearer("sk-file-456")) == 200,
            "so does /v1/models")
    f.check(all(status_of(router, "GET", p) == 200 for p in ("/health", "/ready", "/")),
            "/health, /ready and the status page's HTML stay open")
    for path in ("/metrics", "/v1/router/sets", "/v1/router/status"):
        f.check(status_of(router, "GET", path) == 401 and status_of(router, "GET", path, bearer("sk-flag-123")) == 401 and
                status_of(router, "GET", path, bearer("adm-000")) == 200,
                f"{path} takes the admin key, not the API keys")
    f.check(router.chat(headers=bearer("adm-000"))[0] == 401, "and the admin key is not an API key")
    sent = worker.stats()["headers"]
    f.check(sent and all("authorization" not in h for h in sent), "no client key reaches the worker")

    # Rotation: the file is re-read when it changes; a broken file keeps the keys in force.
    write_keys("sk-rotated-789\n")
    rotated = wait_for(lambda: router.chat(headers=bearer("sk-rotated-789"))[0] == 200, 5)
    f.check(bool(rotated) and router.chat(headers=bearer("sk-file-456"))[0] == 401 and
            router.chat(headers=bearer("sk-flag-123"))[0] == 200,
            "a rewritten key file takes effect without a restart (old file key out, flag key kept)")
    f.check(router.wait_for_log(f"API keys reloaded from {key_file} (1 key(s))"), "the reload is logged")
    write_keys("sk-rotated-789\nnot a key\n")
    f.check(router.wait_for_log("line 2: a key is visible ASCII without spaces; the keys in force stay"),
            "a broken key file is refused, naming the line")
    f.check(router.chat(headers=bearer("sk-rotated-789"))[0] == 200, "and the keys in force stay")
    router.stop()
    log = router.full_log()
    with open(access_log) as lines:
        logged = lines.read()
    f.check(not any(k in log or k in logged for k in KEYS), "no key appears in kvrouter's log or its access log")

    # Without admin keys, the admin routes take the API keys; --forward-authorization.
    router = Router(kvrouter, "m", [worker.url], "--api-key", "sk-flag-123", "--forward-authorization")
    f.check(status_of(router, "GET", "/metrics", bearer("sk-flag-123")) == 200 and status_of(router, "GET", "/metrics") == 401,
            "without --admin-api-key, /metrics takes the API keys")
    router.chat(headers=bearer("sk-flag-123"))
    f.check(worker.stats()["headers"][-1].get("authorization") == "Bearer sk-flag-123",
            "with --forward-authorization the worker gets the client's Authorization")
    router.stop()
    router = Router(kvrouter, "m", [worker.url], "--admin-api-key", "adm-000")
    f.check(router.chat()[0] == 200 and status_of(router, "GET", "/metrics") == 401,
            "admin keys alone guard the admin routes and leave the API open")
    router.stop()
    router = None

    result = subprocess.run([kvrouter, "--model", "m", "--worker", worker.url, "--port", "0", "--api-key-file",
                             os.path.join(tmp, "missing.txt")], capture_output=True, text=True, timeout=20)
    f.check(result.returncode == 2 and "cannot read the API key file" in result.stderr,
            f"a key file that cannot be read stops start-up ({result.returncode}: {result.stderr.strip()[-120:]})")
finally:
    if router and router.proc.poll() is None:
        router.proc.kill()
    worker.stop()
f.exit()

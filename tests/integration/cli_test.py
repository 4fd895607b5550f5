#!/usr/bin/python3
"""Integration: kvrouter's command line answers the way an operator expects: every subcommand
answers --help (exit 0); serving without any worker is an error that says what is missing
(exit 2); describe refuses --config and points to explain; at start-up each set says what it
does with each kind of prompt and warns about paths that route on load alone; --tokenizer takes a
HuggingFace model directory; explain checks the tokenizers serving would load; worker specs take
the config file's key names, and the older kv= / dp= with a warning; kv-dump fails on an endpoint
it never connected to; thread pools default to the cores the process may run on (taskset).
Usage: cli_test.py PATH/TO/kvrouter"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from router_harness import Failures, Router, Worker

kvrouter = sys.argv[1]
f = Failures()


def run(*args):
    result = subprocess.run([kvrouter, *args], capture_output=True, text=True, timeout=20)
    return result.returncode, result.stdout + result.stderr


for command in ([], ["explain"], ["describe"], ["kv-dump"], ["kv-index"], ["tokenize"], ["render-chat"]):
    code, out = run(*command, "--help")
    f.check(code == 0 and "Usage: kvrouter" in out, f"kvrouter {' '.join(command + ['--help'])} prints its usage, exit 0 ({code})")
code, out = run("--model", "m")
f.check(code == 2 and "--model m has no worker: give at least one --worker URL" in out,
        f"--model without a worker is an error naming what is missing (exit {code}: {out.strip()[:120]})")
code, out = run()
f.check(code == 2 and "Usage: kvrouter" in out, f"no arguments: the usage, exit 2 ({code})")
code, out = run("describe", "--config", "x.json")
f.check(code == 2 and "kvrouter explain --config FILE" in out, f"describe refuses --config and points to explain ({code})")
code, out = run("explain")
f.check(code == 2 and "explain needs --config FILE" in out, f"explain without --config is an error ({code})")
code, out = run("--model", "m", "--worker", "http://127.0.0.1:1", "--nats", "nats://127.0.0.1:1,tls://n:4222")
f.check(code == 2 and '--nats: "tls://n:4222" is not a nats://host:port URL' in out,
        f"--nats names a server URL it cannot use (exit {code}: {out.strip()[:120]})")
code, out = run("--model", "m", "--worker", "http://127.0.0.1:1", "--nats", "nats://127.0.0.1:1", "--nats-subject-prefix", "a.*")
f.check(code == 2 and "--nats-subject-prefix" in out and "'*'" in out,
        f"a subject prefix with a wildcard is refused (exit {code}: {out.strip()[:120]})")

# Start-up: what each set does, and what it cannot do.
repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
model_dir = tempfile.mkdtemp()
for name in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(os.path.join(repo, ".cache", "tokenizers", "qwen3", name), model_dir)
worker = Worker("w0")
try:
    bare = Router(kvrouter, "m", [f"{worker.url},id=w0"])
    bare.stop()
    log = bare.full_log()
    f.check("worker set m: 1 worker(s), kv: token ids hashed; text and chats: routed on load (no tokenizer)" in log,
            f"a kv set without a tokenizer says text and chats route on load ({log.strip()[:300]})")
    f.check("warning: worker set m: text and chat prompts route on load alone: no tokenizer" in log, "... and warns")
    full = Router(kvrouter, "m", [f"{worker.url},id=w0"], "--tokenizer", model_dir)
    status, _, _ = full.chat(content="hello there")
    full.stop()
    log = full.full_log()
    f.check("kv: token ids, text and chats hashed" in log and "route on load alone" not in log,
            f"--tokenizer MODEL_DIR loads its tokenizer.json and its chat template ({log.strip()[:300]})")
    f.check(status == 200, "and serves")
finally:
    worker.stop()


def started_thread_counts(*prefix):
    """The thread counts kvrouter prints at start, run under `prefix` (e.g. taskset) with its defaults."""
    proc = subprocess.Popen([*prefix, kvrouter, "--model", "m", "--worker", "http://127.0.0.1:9", "--host", "127.0.0.1",
                             "--port", "0"], stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stderr:
            if "I/O threads" in line:
                return line.strip()
        return ""
    finally:
        proc.kill()
        proc.wait()


if shutil.which("taskset"):
    line = started_thread_counts("taskset", "-c", "0")
    f.check("1 I/O threads, 1 actor threads, 1 hashers" in line,
            f"pinned to one core, the defaults size every pool to that core, not the machine's ({line})")
allowed = len(os.sched_getaffinity(0))
line = started_thread_counts()
f.check(f"{allowed} I/O threads, {allowed} actor threads, {allowed} hashers" in line,
        f"unpinned, one of each per core it may run on ({allowed}: {line})")
empty = tempfile.mkdtemp()
code, out = run("--model", "m", "--worker", "http://127.0.0.1:9", "--port", "0", "--tokenizer", empty)
f.check(code == 2 and f"the model directory {empty} has no tokenizer.json" in out,
        f"a model directory without tokenizer.json stops start-up naming it ({code}: {out.strip()[-200:]})")
config = os.path.join(empty, "sets.json")
with open(config, "w") as out_file:
    json.dump({"worker_sets": [{"name": "s", "model": "m", "tokenizer": os.path.join(empty, "missing.json"),
                                "workers": [{"url": "http://127.0.0.1:9"}]}]}, out_file)
code, out = run("explain", "--config", config)
f.check(code == 2 and "cannot read tokenizer" in out, f"explain checks the tokenizer serving would load ({code}: {out.strip()[-200:]})")

# One spelling per concept: a worker spec's keys are the config file's worker keys; the older
# kv= and dp= still work, with a warning naming the new key.
worker = Worker("w0")
try:
    router = Router(kvrouter, "m", [f"{worker.url},kv=tcp://127.0.0.1:9,dp=2,id=old"])
    f.check(router.wait_for_log('"kv=" is the old spelling of "kv_events="') and
            router.wait_for_log('"dp=" is the old spelling of "dp_size="'), "the old kv= and dp= keys are warned about")
    sets = json.loads(router.request("GET", "/v1/router/sets")[2])["sets"]
    f.check(sets[0]["pipeline"]["kv_publishers"] == 2 and router.chat()[0] == 200,
            f"and still read: two KV publishers for dp=2, requests served ({sets[0]['pipeline']})")
    router.stop()
    router = Router(kvrouter, "m", [f"{worker.url},kv_events=tcp://127.0.0.1:9,dp_size=2,id=new"])
    f.check(router.chat()[0] == 200 and "old spelling" not in router.log, "the new spelling serves without a warning")
    router.stop()
finally:
    worker.stop()
# Tools exit non-zero when they fail: kv-dump against an endpoint nobody publishes on says so.
code, out = run("kv-dump", "--connect", "tcp://127.0.0.1:9", "--duration", "0.5")
f.check(code == 1 and "never connected to tcp://127.0.0.1:9" in out, f"kv-dump of a dead endpoint fails, saying why ({code}: {out.strip()})")
import zmq
publisher = zmq.Context.instance().socket(zmq.PUB)
idle_port = publisher.bind_to_random_port("tcp://127.0.0.1")
code, out = run("kv-dump", "--connect", f"tcp://127.0.0.1:{idle_port}", "--duration", "0.5")
f.check(code == 0 and not out.strip(), f"kv-dump of an idle engine prints nothing and succeeds ({code}: {out.strip()})")
publisher.close(0)
code, out = run("--model", "m", "--worker", "http://127.0.0.1:9,dp_size=0")
f.check(code == 2 and "dp_size must be a rank count" in out, f"a bad dp_size is named as spelled now ({out.strip()})")
f.exit()

#!/usr/bin/python3
"""kvrouter-bench compare, run as a user runs it: kv routing beats round-robin on a shared-prefix
workload whose prefixes exceed any one worker's cache, and the outputs (table, JSON, CSV, PNG)
carry what they promise; the image and text chat workloads run through real templates and
tokenizers in router and mockers.

A small, quick version of the documented benchmark (docs/benchmarks.md has the full one).

usage: bench_compare_test.py BENCH_BINARY
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

from router_harness import Failures, Router, Worker


def main():
    bench = sys.argv[1]
    f = Failures()
    out = tempfile.mkdtemp()
    json_path, csv_path, png_path = (os.path.join(out, name) for name in ("r.json", "r.csv", "ttft.png"))
    # 8 groups x 2048-token prefixes = 1024 blocks; each mocker holds 384.
    run = subprocess.run([bench, "compare", "--policies", "kv,round-robin", "--mockers", "3",
                          "--mocker-flag=--num-blocks", "--mocker-flag=384", "--mocker-flag=--speedup", "--mocker-flag=10",
                          "--groups", "8", "--prompts-per-group", "12", "--system-tokens", "2048", "--question-tokens", "64",
                          "--output-tokens", "8", "--rate", "30", "--no-progress",
                          "--out", json_path, "--csv", csv_path, "--plot", png_path],
                         capture_output=True, text=True, timeout=240)
    print(run.stdout)
    f.check(run.returncode == 0, f"compare exits 0 ({run.returncode}; {run.stderr.strip()[-300:]})")
    reports = {r["policy"]: r for r in json.load(open(json_path))}
    needed = {"policy", "requests", "errors", "rps", "hit_rate", "ttft_mean_ms", "ttft_p50_ms", "ttft_p99_ms",
              "itl_mean_ms", "router_cpu_us_per_req"}
    f.check(set(reports) == {"kv", "round-robin"} and all(needed <= set(r) for r in reports.values()),
            "the JSON has one object per policy with every documented field")
    kv, rr = reports["kv"], reports["round-robin"]
    f.check(kv["requests"] == 96 and kv["errors"] == 0 and rr["errors"] == 0, "every request succeeds under both policies")
    f.check(kv["hit_rate"] >= 2 * rr["hit_rate"],
            f"kv's prefix-cache hit rate is at least twice round-robin's ({kv['hit_rate']:.2f} vs {rr['hit_rate']:.2f})")
    f.check(kv["ttft_mean_ms"] < rr["ttft_mean_ms"],
            f"kv's mean TTFT is lower ({kv['ttft_mean_ms']:.1f} vs {rr['ttft_mean_ms']:.1f} ms)")
    f.check(kv["router_cpu_us_per_req"] > 0, "router CPU per request is measured")
    rows = list(csv.DictReader(open(csv_path)))
    f.check([r["policy"] for r in rows] == ["kv", "round-robin"], "the CSV has the same rows")
    f.check(open(png_path, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "the TTFT plot is a PNG")
    f.check("hit rate" in run.stdout and "round-robin" in run.stdout, "the table is printed")
    # The image workload: URLs on the bench's own image server, kv against the gated-off preset.
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    mm_json = os.path.join(out, "mm.json")
    run = subprocess.run([bench, "compare", "--policies", "kv,load-aware", "--mockers", "2",
                          "--mocker-flag=--speedup", "--mocker-flag=20", "--images-per-request", "1",
                          "--distinct-images", "8", "--groups", "4", "--prompts-per-group", "8", "--output-tokens", "4",
                          "--rate", "40", "--no-progress", "--out", mm_json,
                          "--tokenizer", os.path.join(repo, ".cache", "tokenizers", "qwen3", "tokenizer.json"),
                          "--tokenizer-config", os.path.join(repo, "tests", "data", "chat_templates", "qwen2_vl_style.jinja"),
                          "--image-token-id", "151655"], capture_output=True, text=True, timeout=240)
    mm = {r["policy"]: r for r in json.load(open(mm_json))} if run.returncode == 0 else {}
    f.check(run.returncode == 0 and mm["kv"]["errors"] == 0 and mm["load-aware"]["errors"] == 0,
            f"the image workload runs without errors ({run.stderr.strip()[-200:]})")
    f.check(mm and mm["kv"]["dims_cache_hit_rate"] == 0.75 and mm["load-aware"]["dims_cache_hit_rate"] is None,
            f"kv fetched each of the 8 images once (cache hit rate 24/32) and load-aware looked up none "
            f"({mm and mm['kv']['dims_cache_hit_rate']}, {mm and mm['load-aware']['dims_cache_hit_rate']})")

    # Text chats: conversations of words rendered through Qwen3's chat template and tokenizer by
    # router and mockers; 6 system prompts of ~900 tokens against 3 mockers of 160 blocks.
    chats_json = os.path.join(out, "chats.json")
    qwen3 = os.path.join(repo, ".cache", "tokenizers", "qwen3")
    run = subprocess.run([bench, "compare", "--policies", "kv,round-robin", "--mockers", "3",
                          "--mocker-flag=--num-blocks", "--mocker-flag=160", "--mocker-flag=--speedup", "--mocker-flag=10",
                          "--chats", "--groups", "6", "--prompts-per-group", "4", "--turns", "2", "--system-words", "300",
                          "--question-words", "20", "--output-tokens", "4", "--rate", "20", "--no-progress", "--out", chats_json,
                          "--tokenizer", os.path.join(qwen3, "tokenizer.json"),
                          "--tokenizer-config", os.path.join(qwen3, "tokenizer_config.json")],
                         capture_output=True, text=True, timeout=240)
    chats = {r["policy"]: r for r in json.load(open(chats_json))} if run.returncode == 0 else {}
    f.check(bool(chats) and chats["kv"]["requests"] == 48 and chats["kv"]["errors"] == 0 and chats["round-robin"]["errors"] == 0,
            f"the text chat workload runs without errors ({run.stderr.strip()[-200:]})")
    f.check(bool(chats) and chats["kv"]["hit_rate"] > chats["round-robin"]["hit_rate"] + 0.2,
            f"kv keeps each group's rendered system prompt together ({chats and chats['kv']['hit_rate']:.2f} vs "
            f"{chats and chats['round-robin']['hit_rate']:.2f})")
    f.check(bool(chats) and chats["kv"]["workload"].startswith("text chats: 6 groups x 4 conversations x 2 turns"),
            f"the JSON names the workload ({chats and chats['kv']['workload']})")
    no_template = subprocess.run([bench, "compare", "--chats", "--no-progress"], capture_output=True, text=True, timeout=60)
    f.check(no_template.returncode != 0 and "--chats needs --tokenizer and --tokenizer-config" in no_template.stderr,
            "text chats without a tokenizer are refused")

    f.check(all(r["workload"].startswith("shared-prefix: 8 groups x 12 prompts") for r in reports.values()),
            f"the JSON names the workload ({reports['kv'].get('workload')})")
    f.check(not [n for n in os.listdir(out) if n.startswith(".")], f"no hidden data files are left ({os.listdir(out)})")

    # A rate sweep: one run per rate, one table, one plot against offered load.
    sweep_json, sweep_png = os.path.join(out, "sweep.json"), os.path.join(out, "sweep.png")
    run = subprocess.run([bench, "compare", "--policies", "kv,kv-queue:1", "--mockers", "2", "--rate-sweep", "20,40",
                          "--mocker-flag=--speedup", "--mocker-flag=10", "--groups", "4", "--prompts-per-group", "6",
                          "--output-tokens", "4", "--no-progress", "--out", sweep_json, "--plot", sweep_png],
                         capture_output=True, text=True, timeout=240, cwd=out)
    print(run.stdout)
    sweep = json.load(open(sweep_json)) if run.returncode == 0 else []
    f.check([(r["policy"], r["offered_rate"]) for r in sweep] == [("kv", 20), ("kv", 40), ("kv-queue:1", 20), ("kv-queue:1", 40)],
            f"a sweep runs every policy at every rate ({run.returncode}: {run.stderr.strip()[-300:]})")
    f.check(all(r["errors"] == 0 and r["requests"] == 24 for r in sweep), "... every request succeeding")
    f.check(os.path.exists(sweep_png) and open(sweep_png, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "the sweep plot is a PNG")
    f.check("offered" in run.stdout, "the table has the offered-load column")
    f.check(not [n for n in os.listdir(out) if n.startswith(".")], "still no hidden files")
    f.check("kvrouter-bench: 2 mockers x" in run.stderr and "distinct blocks" in run.stderr,
            "compare says which caches it gave the mockers by default")
    # Disaggregated clusters beside the aggregated one: one row per protocol, every request served.
    pd_json = os.path.join(out, "pd.json")
    run = subprocess.run([bench, "compare", "--policies", "kv", "--mockers", "2", "--prefill", "1", "--decode", "1",
                          "--pd", "vllm-nixl,sglang", "--mocker-flag=--speedup", "--mocker-flag=10", "--groups", "3",
                          "--prompts-per-group", "6", "--output-tokens", "6", "--rate", "30", "--no-progress",
                          "--out", pd_json], capture_output=True, text=True, timeout=240)
    pd = json.load(open(pd_json)) if run.returncode == 0 else []
    f.check([r["policy"] for r in pd] == ["kv", "kv 1P+1D vllm-nixl", "kv 1P+1D sglang"],
            f"--prefill/--decode add a disaggregated run per protocol ({[r['policy'] for r in pd]}; {run.stderr.strip()[-300:]})")
    f.check(all(r["errors"] == 0 and r["requests"] == 18 and r["itl_p50_ms"] is not None for r in pd),
            "... every request answered, TTFT and ITL measured")
    f.check(all(r["hit_rate"] > 0.3 for r in pd), f"... the prefill pool's cache hit ({[r['hit_rate'] for r in pd]})")
    half = subprocess.run([bench, "compare", "--prefill", "2"], capture_output=True, text=True)
    f.check(half.returncode == 2 and "--decode" in half.stderr, "--prefill without --decode is refused")

    # run, against a router started by hand, takes its only model from /v1/models.
    worker = Worker("w0", "--chunks", "3")
    router = Router(os.path.join(os.path.dirname(bench), "kvrouter"), "served-model", [f"{worker.url},id=w0"])
    try:
        ran = subprocess.run([bench, "run", "--url", f"http://127.0.0.1:{router.port}", "--requests", "4", "--groups", "2",
                              "--prompts-per-group", "2", "--no-progress"], capture_output=True, text=True, timeout=60)
        models = {json.loads(b)["model"] for b in worker.stats()["bodies"]}
        f.check(ran.returncode == 0 and models == {"served-model"},
                f"run without --model sends the router's only model ({ran.returncode}, {models}: {ran.stderr.strip()[-200:]})")
    finally:
        router.stop()
        worker.stop()
    clash = subprocess.run([bench, "compare", "--rate-sweep", "1,2", "--rate", "3"], capture_output=True, text=True)
    f.check(clash.returncode == 2 and "--rate-sweep" in clash.stderr, "a sweep with --rate is refused")

    bad = subprocess.run([bench, "compare", "--policies", "fastest"], capture_output=True, text=True)
    f.check(bad.returncode == 2 and "unknown policy fastest" in bad.stderr, "an unknown policy is refused by name")
    f.exit()


if __name__ == "__main__":
    main()

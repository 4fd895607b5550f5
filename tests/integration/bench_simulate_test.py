#!/usr/bin/python3
"""kvrouter-bench simulate, run as a user runs it: compare's command line in virtual time. On
the same shared-prefix workload as bench_compare_test, kv keeps each group's prefix on one
engine and beats round-robin; two runs print the same figures (it is deterministic);
--target-utilization derives the rate from the engines' timing model; --request-latency-ms
delays what crosses the wire; and a mocker flag the
engine model does not have is refused by name.

usage: bench_simulate_test.py BENCH_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile

from router_harness import Failures

WORKLOAD = ["--mocker-flag=--num-blocks", "--mocker-flag=384", "--mocker-flag=--speedup", "--mocker-flag=10",
            "--groups", "8", "--prompts-per-group", "12", "--system-tokens", "2048", "--question-tokens", "64",
            "--output-tokens", "8", "--rate", "30", "--no-progress"]


def simulate(bench, out, *extra):
    return subprocess.run([bench, "simulate", "--policies", "kv,round-robin", "--mockers", "3", *WORKLOAD,
                           "--out", out, *extra], capture_output=True, text=True, timeout=60)


def main():
    bench = sys.argv[1]
    f = Failures()
    tmp = tempfile.mkdtemp()
    first, second = os.path.join(tmp, "a.json"), os.path.join(tmp, "b.json")
    run = simulate(bench, first)
    print(run.stdout, run.stderr)
    f.check(run.returncode == 0, f"simulate exits 0 ({run.returncode}; {run.stderr.strip()[-300:]})")
    reports = {r["policy"]: r for r in json.load(open(first))}
    kv, rr = reports["kv"], reports["round-robin"]
    f.check(kv["requests"] == 96 and kv["errors"] == 0 and rr["errors"] == 0, "every request is answered under both policies")
    f.check(kv["hit_rate"] > 0.7 and kv["hit_rate"] > rr["hit_rate"] + 0.3,
            f"kv keeps the groups' prefixes where round-robin scatters them (hit rate {kv['hit_rate']:.3f} "
            f"vs {rr['hit_rate']:.3f})")
    f.check(kv["ttft_mean_ms"] < rr["ttft_mean_ms"], f"and answers sooner (TTFT {kv['ttft_mean_ms']:.1f} vs {rr['ttft_mean_ms']:.1f} ms)")
    f.check("simulated kv (96 requests" in run.stderr, "it says what it simulated")
    # The way to the engine and back: round-robin's placements do not depend on time, so its
    # TTFT grows by exactly twice the latency (there and back) over the default 2 ms.
    wire = os.path.join(tmp, "wire.json")
    direct = simulate(bench, wire, "--request-latency-ms", "0")
    if direct.returncode == 0:
        rr0 = {r["policy"]: r for r in json.load(open(wire))}["round-robin"]
        f.check(abs((rr["ttft_mean_ms"] - rr0["ttft_mean_ms"]) - 4.0) < 0.05,
                f"--request-latency-ms 2 (the default) adds 4 ms to round-robin's TTFT over 0 "
                f"({rr0['ttft_mean_ms']:.2f} -> {rr['ttft_mean_ms']:.2f} ms)")
    again = simulate(bench, second)
    f.check(again.returncode == 0 and json.load(open(second)) == json.load(open(first)), "a second run gives the same figures")
    # --target-utilization in place of --rate: 2112-token prompts at 5 us a token plus 8 decode
    # slots of 15 us are 10.68 ms of cold work each; 3 engines half busy take 140.4 requests/s.
    loaded = subprocess.run([bench, "simulate", "--policies", "round-robin", "--mockers", "3",
                             *[a for a in WORKLOAD if a not in ("--rate", "30")], "--target-utilization", "0.5",
                             "--out", second], capture_output=True, text=True, timeout=60)
    f.check(loaded.returncode == 0 and "--target-utilization 0.5: 140.4 requests/s" in loaded.stderr,
            f"--target-utilization derives the rate from the engines' timing model ({loaded.stderr.strip()[-200:]})")
    if loaded.returncode == 0:
        rps = json.load(open(second))[0]["rps"]
        f.check(90 < rps < 200, f"and the run goes at about that rate ({rps:.1f} requests/s)")
    both = simulate(bench, second, "--target-utilization", "0.5")
    f.check(both.returncode != 0 and "--target-utilization sets the rate" in both.stderr,
            "--target-utilization with --rate is refused")
    refused = simulate(bench, first, "--mocker-flag=--kv-lease-secs", "--mocker-flag=3")
    f.check(refused.returncode != 0 and "--kv-lease-secs" in refused.stderr,
            f"a mocker flag outside the engine model is refused by name ({refused.stderr.strip()[-120:]})")
    f.exit()


if __name__ == "__main__":
    main()

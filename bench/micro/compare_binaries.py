#!/usr/bin/python3
"""Runs Google Benchmark binaries alternately, one process each per round, and prints the
median items/s (bytes/s where a benchmark counts no items) of every benchmark per binary, the
last binary's ratio to the first, and each binary's slowest round (what a target must hold in
the machine's slow mode too).

Why alternate processes: this machine has slow and fast modes that last seconds to minutes, and
one process can run 30% slower than the next; a before/after measured in one process each, or
one after the other, measures the machine as much as the code. Alternating N rounds and taking
medians puts both binaries through the same modes.

    bench/micro/compare_binaries.py ROUNDS FILTER BINARY_BEFORE BINARY_AFTER [MORE...]
    e.g. bench/micro/compare_binaries.py 5 'decode_and_apply' /tmp/kv_wire_before build/bench/kvr_bench_kv_wire
"""
import collections
import json
import statistics
import subprocess
import sys


def main() -> int:
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    rounds, benchmark_filter, binaries = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    rates = collections.defaultdict(lambda: collections.defaultdict(list))
    for _ in range(rounds):
        for binary in binaries:
            run = subprocess.run([binary, f"--benchmark_filter={benchmark_filter}", "--benchmark_min_time=0.3",
                                  "--benchmark_format=json"], capture_output=True, text=True, check=True)
            for benchmark in json.loads(run.stdout)["benchmarks"]:
                # items/s where the benchmark counts items, else bytes/s
                rate = benchmark.get("items_per_second", benchmark.get("bytes_per_second", 0.0))
                rates[benchmark["name"]][binary].append(rate / 1e6)
    print(f"median items/s or bytes/s (M) over {rounds} alternating rounds: " + " | ".join(binaries))
    for name, per_binary in rates.items():
        # A benchmark one binary lacks (added since) shows as "-".
        medians = [statistics.median(per_binary[b]) if per_binary[b] else None for b in binaries]
        slowest = [min(per_binary[b]) if per_binary[b] else None for b in binaries]
        show = lambda values, width: "  ".join(f"{v:{width}.2f}" if v is not None else "-".rjust(width) for v in values)
        ratio = (f"  {medians[-1] / medians[0]:.2f}x"
                 if len(binaries) > 1 and medians[0] and medians[-1] is not None else "")
        print(f"{name:48s} " + show(medians, 7) + ratio + "   slowest: " + show(slowest, 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Integration: kvrouter's command line answers the way an operator expects: every subcommand
answers --help (exit 0); serving without any worker is an error that says what is missing
(exit 2); describe refuses --config and points to explain. Usage: cli_test.py PATH/TO/kvrouter"""
import subprocess
import sys

from router_harness import Failures

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
f.exit()

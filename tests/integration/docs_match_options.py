#!/usr/bin/python3
"""docs/configuration.md says what `kvrouter --help` says: every serving option and router knob
the option tables define is in the docs' tables with the same value and default, and the docs
list none that does not exist. Usage: docs_match_options.py PATH/TO/kvrouter PATH/TO/configuration.md

On a mismatch it prints the rows the tables would have, to paste into the docs."""
import re
import subprocess
import sys

kvrouter, docs_path = sys.argv[1], sys.argv[2]
help_text = subprocess.run([kvrouter, "--help"], capture_output=True, text=True, check=True).stdout


def help_rows(section):
    """(flag with value, default) for each option of a --help section, in order."""
    body = help_text.split(f"\n{section}")[1].split("\n\n")[0]
    rows, current = [], None
    for line in body.splitlines()[1:]:
        match = re.match(r"  (--[a-z0-9-]+)( [A-Za-z|.]+)?\s{2,}(.*)", line)
        if match:
            current = [match.group(1) + (match.group(2) or ""), match.group(3)]
            rows.append(current)
        elif current and line.startswith(" " * 36):
            current[1] += " " + line.strip()
    out = []
    for flag, text in rows:
        default = re.search(r"\(default ([^;)]*)[;)]", text)
        out.append((flag, default.group(1) if default else ""))
    return out


def docs_rows(heading):
    """(first column, second column) of the first table under `heading` in the docs."""
    docs = open(docs_path).read()
    section = docs.split(f"\n{heading}\n")[1]
    rows = []
    for line in section.splitlines():
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] in ("flag", "key / flag") or set(cells[0]) <= {"-"}:
            continue
        rows.append((cells[0].strip("`"), cells[1].strip("`")))
    return rows


failures = []
serving_help = help_rows("Worker sets:") + help_rows("Serving options:")
serving_docs = docs_rows("## Serving flags")
if dict(serving_help) != dict(serving_docs):
    failures.append("the serving flags table of docs/configuration.md differs from kvrouter --help:")
    for flag, default in serving_help:
        if (flag, default) not in serving_docs:
            failures.append(f"  --help has {flag!r} with default {default!r}")
    for flag, default in serving_docs:
        if (flag, default) not in serving_help:
            failures.append(f"  the docs have {flag!r} with default {default!r}")

knob_help = {flag.split()[0][2:].replace("-", "_"): default for flag, default in help_rows("Router options")
             if " " in flag}
knob_docs = dict(docs_rows("## Router knobs"))
if knob_help != knob_docs:
    failures.append(f"the router knobs table differs: --help {knob_help}, docs {knob_docs}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"docs/configuration.md matches kvrouter --help ({len(serving_help)} serving options, {len(knob_help)} knobs)")

#!/usr/bin/env python3
"""Judges builds against their size budgets (bench/size-budgets.txt, the
one file the budgets live in; SPEC.md, "Budgets"):

    scripts/check/check-sizes.py [--budget KEY=BYTES]... KEY=FILE...

KEY is a key of the budgets file (docs/figures.md's key for that build:
size.x86_64-unknown-linux-gnu.plain, deb.amd64, ...) and FILE the build
or package to judge. Prints a markdown table of each file's bytes, its
budget and what is left; exits 1 when any file is over its budget, 2 when
a KEY has no budget or a FILE does not exist (a check that judged nothing
must not pass). --budget KEY=BYTES replaces KEY's budget for this run
(scripts/check/check-sizes.sh lowers one under a build to show that the
check fails); BUDGETS=PATH reads another budgets file.

    scripts/check/check-sizes.py --stated

prints KEY WORDS for each budget README.md states (WORDS as it states it).
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUDGETS = os.environ.get("BUDGETS") or os.path.join(ROOT, "bench", "size-budgets.txt")
UNITS = {"KiB": 1024, "MiB": 1024 * 1024}


def load(path=BUDGETS):
    """{key: (bytes, words)}: each line of the budgets file is KEY BYTES
    and, for a budget README.md states, the words it states it in (768 KiB);
    # starts a comment."""
    budgets = {}
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            if len(fields) not in (2, 4) or not fields[1].isdigit():
                raise SystemExit(f"{path}:{number}: not KEY BYTES [N KiB|MiB]: {line.strip()}")
            words = " ".join(fields[2:])
            if words and in_bytes(words) != int(fields[1]):
                raise SystemExit(f"{path}:{number}: {words} is not {fields[1]} bytes")
            budgets[fields[0]] = (int(fields[1]), words)
    return budgets


def in_bytes(words):
    """768 KiB, 2.25 MiB: the bytes they name, or None."""
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?) (KiB|MiB)", words)
    return None if match is None else round(float(match[1]) * UNITS[match[2]])


def judge(files, budgets):
    """(rows, over): a table row for each (key, path), and the keys over budget."""
    rows, over = [], []
    for key, path in files:
        size = os.stat(path).st_size
        budget = budgets[key][0]
        left = budget - size
        verdict = "met" if left >= 0 else "**over budget**"
        if left < 0:
            over.append(key)
        rows.append(f"| `{key}` ({path}) | {size:,} | {budget:,} | {left:,} ({100 * left / budget:.1f}%) | {verdict} |")
    return rows, over


def parse(argv, budgets):
    files = []
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--budget" and args:
            key, _, value = args.pop(0).partition("=")
            if key not in budgets or not value.isdigit():
                raise SystemExit(f"check-sizes: --budget {key}={value}: no such budget, or not bytes")
            budgets[key] = (int(value), "")
        elif "=" in arg and not arg.startswith("-"):
            key, _, path = arg.partition("=")
            if key not in budgets:
                raise SystemExit(f"check-sizes: no budget for {key} in {BUDGETS}")
            if not os.path.isfile(path):
                raise SystemExit(f"check-sizes: {key}: no file {path} (build it first)")
            files.append((key, path))
        else:
            raise SystemExit(__doc__)
    if not files:
        raise SystemExit(__doc__)
    return files


def main(argv):
    budgets = load()
    if argv[1:] == ["--stated"]:
        for key, (_, words) in budgets.items():
            if words:
                print(key, words)
        return 0
    try:
        files = parse(argv[1:], budgets)
    except SystemExit as stop:
        print(stop.code, file=sys.stderr)
        return 2
    rows, over = judge(files, budgets)
    print("| build | bytes | budget | left | |")
    print("|---|--:|--:|--:|---|")
    print("\n".join(rows))
    for key in over:
        print(f"check-sizes: {key} is over its budget", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

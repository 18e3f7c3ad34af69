#!/usr/bin/env python3
"""The published figures, kept in one generated file: docs/figures.md.

    bench/figures.py record KEY VALUE [KEY VALUE...]
    bench/figures.py replace PREFIX [KEY VALUE...]

record rewrites KEY's row (adding it if new) with VALUE, today's date
(UTC) and the machine this runs on (nproc, CPU model, kernel,
distribution), and leaves every other row as it was; replace first drops
every row whose key starts with PREFIX (a build's parts, where a crate
may be gone since), then records. The page is read back from itself: no
other state. It is rewritten on purpose only, by a benchmark run; no
build, package, smoke test or CI step writes it. Who records what:

    bench/run.sh footprint   size.HOST, size.HOST.plain, size.cargo,
                             idle.*, store.1000000.*; and what it finds
                             built: size.TARGET of every build under
                             target/ (the static, cross and ARM builds of
                             release-build.sh and cross-smoke.sh),
                             size.HOST.postgres, size.TARGET.acme (the
                             packages' builds), deb.ARCH (package-deb.sh's
                             packages); made.HOST.https.* and
                             made.HOST.plain.* (what the host's two builds
                             are made of, from their linker maps:
                             bench/linkmap.py)
    bench/run.sh https       tls.idle.N (what N idle TLS connections add)

README.md and docs/ link to the page instead of copying its numbers, so
that a figure is measured in one place and written down once. A key this
file does not describe is refused, so that a typo cannot add a row no
page explains. FIGURES=PATH writes another file (a trial run).
"""

import datetime
import hashlib
import os
import platform
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.environ.get("FIGURES") or os.path.join(ROOT, "docs", "figures.md")

# (pattern, table, unit, description): the first that matches describes a
# key; its order is the order of the rows.
KINDS = [
    (r"size\.([a-z0-9_]+-[a-z0-9_-]+)", "sizes", "bytes",
     "published build of {0}, default features (HTTPS), stripped: scripts/release/release-build.sh {0}"),
    (r"size\.([a-z0-9_]+-[a-z0-9_-]+)\.plain", "sizes", "bytes",
     "published plain build (HTTP only) of {0}, stripped: FEATURES=plain scripts/release/release-build.sh {0}"),
    (r"size\.([a-z0-9_]+-[a-z0-9_-]+)\.acme", "sizes", "bytes",
     "build of {0} with ACME (the packages' build), stripped: FEATURES=acme scripts/release/release-build.sh {0}"),
    (r"size\.([a-z0-9_]+-[a-z0-9_-]+)\.postgres", "sizes", "bytes",
     "published PostgreSQL build of {0}, stripped: FEATURES=postgres scripts/release/release-build.sh {0}"),
    (r"size\.cargo", "sizes", "bytes",
     "a plain `cargo build --release` on the host (default features; std not rebuilt), stripped; not published"),
    (r"deb\.([a-z0-9]+)", "sizes", "bytes",
     "Debian package plantstore_VERSION_{0}.deb: scripts/release/package-deb.sh"),
    (r"idle\.floor\.rss", "memory", "KiB",
     "a dynamically linked C program's floor: sleep(1)'s RSS"),
    (r"idle\.([a-z-]+)\.private", "memory", "KiB",
     "idle, {0}: private memory (RssAnon), the largest of the starts measured"),
    (r"idle\.([a-z-]+)\.rss", "memory", "KiB",
     "idle, {0}: RSS as ps shows it (private + mapped files, the C library's shared pages included)"),
    (r"store\.([0-9]+)\.private", "memory", "KiB",
     "private memory added by {0} short plants stored through the API (HTTPS build, in memory)"),
    (r"store\.([0-9]+)\.rss", "memory", "KiB",
     "RSS added by {0} short plants stored through the API (HTTPS build, in memory)"),
    (r"tls\.idle\.([0-9]+)", "memory", "KiB",
     "RSS added by {0} idle TLS connections: bench/run.sh https"),
    (r"made\.([a-z0-9_]+-[a-z0-9_-]+)\.(https|plain)\.crate\.([A-Za-z0-9_-]+)", "made", "bytes",
     "{0}, {1}: {2}"),
    (r"made\.([a-z0-9_]+-[a-z0-9_-]+)\.(https|plain)\.module\.([A-Za-z0-9_]+)", "made", "bytes",
     "{0}, {1}: plantstore's module {2}"),
]
BUILDS = {
    "https": "the HTTPS build (default), in memory",
    "https-data": "the HTTPS build with --data (a new journal)",
    "plain": "the plain build, in memory",
    "static": "the static build (musl), in memory",
}
# The parts of a build (bench/linkmap.py): the build, and the parts
# without a crate's name.
PARTS = {
    "https": "HTTPS build (default)",
    "plain": "plain build",
    "constants": "constants without a symbol (strings, panic locations, tables)",
    "unwind": "unwind tables",
    "runtime": "the C runtime, libgcc and what the linker makes",
    "other-crates": "the other crates together",
    "root": "root (lib.rs, main.rs)",
}
TABLES = [
    ("sizes", "Sizes", "build", "bytes", "KiB"),
    ("memory", "Memory", "what", "KiB", "MiB"),
    ("made", "What the builds are made of", "part (bench/linkmap.py: the largest crates, "
     "then plantstore's modules)", "bytes", "KiB"),
]

HEAD = """# Figures

<!-- Generated by bench/figures.py; do not edit by hand. -->

Generated by `bench/figures.py`, never edited by hand, and rewritten on
purpose only: `bench/run.sh footprint` rewrites the host's builds, what
they are made of and idle memory, and the sizes of the other builds and
packages it finds built (by `scripts/release/release-build.sh`,
`cross-smoke.sh` and `package-deb.sh`, which write nothing here, nor does
CI); `bench/run.sh https` the idle TLS connections. Each row
names the day and the machine (below) it was measured on: figures of
different machines, or far apart in time, compare poorly. The sizes are
held to the budgets of `bench/size-budgets.txt` (README.md states them;
CI's `scripts/check/check-sizes.sh` enforces them), the rest to the spec's
(`bench/run.sh budgets` judges them). Memory is
counted as the process's own (private: RssAnon); RSS adds the pages of
files mapped in, most of them the C library's, shared with every process.
"""


def describe(key):
    """(table, unit, description) of KEY, or None."""
    for pattern, table, unit, text in KINDS:
        match = re.fullmatch(pattern, key)
        if match:
            names = PARTS if table == "made" else BUILDS
            words = [f"{int(g):,}" if g.isdigit() else names.get(g, g) for g in match.groups()]
            return table, unit, text.format(*words)
    return None


def place(key, value):
    """Where KEY's row goes: by its kind (a build's private memory and its
    RSS as one), then its build, then its name; a build's parts by their
    build, then crates before modules, the largest first."""
    kind = next(i for i, k in enumerate(KINDS) if re.fullmatch(k[0], key))
    if key.startswith("made."):
        _, target, build, what, _ = key.split(".", 4)
        return 0, (target, build, what != "crate"), -float(value)
    if KINDS[kind][0].startswith(r"idle\.([a-z-]+)"):
        kind = min(i for i, k in enumerate(KINDS) if k[0].startswith(r"idle\.([a-z-]+)"))
    parts = key.split(".")
    build = list(BUILDS).index(parts[1]) if len(parts) > 1 and parts[1] in BUILDS else -1
    return kind, build, key


def machine():
    """(id, cells) of the machine this runs on."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                name, _, value = line.partition(":")
                if name.strip() in ("model name", "Model", "Hardware") and not model:
                    model = value.strip()
    except OSError:
        pass
    distro = ""
    try:
        with open("/etc/os-release", encoding="utf-8") as release:
            for line in release:
                if line.startswith("PRETTY_NAME="):
                    distro = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    cells = [str(os.cpu_count() or "?"), model or platform.machine(),
             platform.system() + " " + platform.release() + " " + platform.machine(),
             distro or "?"]
    cells = [c.replace("|", "/") for c in cells]
    ident = "m-" + hashlib.sha1("|".join(cells).encode()).hexdigest()[:6]
    return ident, cells


def cells_of(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def read(path):
    """The rows ({key: (value, date, machine)}) and machines ({id: cells})."""
    rows, machines = {}, {}
    if not os.path.exists(path):
        return rows, machines
    with open(path, encoding="utf-8") as page:
        for line in page:
            if not line.startswith("| "):
                continue
            cells = cells_of(line)
            if cells[-1].startswith("`") and len(cells) == 6:
                key = cells[-1].strip("`")
                rows[key] = (cells[1].replace(",", ""), cells[3], cells[4])
            elif re.fullmatch(r"m-[0-9a-f]{6}", cells[0]) and len(cells) == 5:
                machines[cells[0]] = cells[1:]
    return rows, machines


def number(value, places=0):
    return f"{float(value):,.{places}f}" if places else f"{int(float(value)):,}"


def write(path, rows, machines, today):
    out = [HEAD, f"Last rewritten {today}.", ""]
    order = {key: place(key, rows[key][0]) for key in rows}
    for table, title, what, unit, scaled in TABLES:
        keys = sorted((k for k in rows if describe(k)[0] == table), key=order.get)
        if not keys:
            continue
        out += [f"## {title}", "", f"| {what} | {unit} | {scaled} | measured | machine | key |",
                "|---|--:|--:|---|---|---|"]
        for key in keys:
            value, date, host = rows[key]
            out.append(f"| {describe(key)[2]} | {number(value)} | "
                       f"{number(float(value) / 1024, 1)} | {date} | {host} | `{key}` |")
        out.append("")
    used = sorted({host for _, _, host in rows.values()})
    out += ["## Machines", "", "| machine | CPUs (nproc) | CPU model | kernel | distribution |",
            "|---|---|---|---|---|"]
    out += [f"| {host} | " + " | ".join(machines.get(host, ["?"] * 4)) + " |" for host in used]
    with open(path + ".tmp", "w", encoding="utf-8") as page:
        page.write("\n".join(out) + "\n")
    os.replace(path + ".tmp", path)


def record(pairs, prefix=None):
    if (not pairs and prefix is None) or len(pairs) % 2:
        raise SystemExit("usage: bench/figures.py record KEY VALUE [KEY VALUE...]")
    rows, machines = read(PAGE)
    if prefix is not None:
        rows = {key: row for key, row in rows.items() if not key.startswith(prefix)}
    host, cells = machine()
    machines[host] = cells
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    for key, value in zip(pairs[::2], pairs[1::2]):
        if describe(key) is None:
            raise SystemExit(f"bench/figures.py: no row is described for {key}")
        if not re.fullmatch(r"[0-9]+(\.[0-9]+)?", value):
            raise SystemExit(f"bench/figures.py: {key}: {value!r} is not a number")
        rows[key] = (value, today, host)
    write(PAGE, rows, machines, today)


def main(argv):
    if len(argv) >= 2 and argv[1] == "record":
        record(argv[2:])
    elif len(argv) >= 3 and argv[1] == "replace" and argv[2]:
        record(argv[3:], argv[2])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)

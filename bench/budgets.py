#!/usr/bin/env python3
"""The budgets section of bench/run.sh: every budget of the spec (SPEC.md,
"Budgets"), met or not, from the figures the sections before it measured.

    bench/budgets.py FIGURES

FIGURES holds NAME=VALUE lines, written by bench/sections/budgets.sh from
the shell that ran the sections: its scalars (IDLE, HTTPS_SIZE, ...) and
SUM.KEY for each sum of rounds (SUM[KEY] there). A section not run leaves
its figures out, and its rows are left out here. The arithmetic is here
rather than in awk one-liners: means, ratios and comparisons, printed as
the shell version printed them (C's %.Nf).
"""

import os
import sys

# Sizes are ratchets: a budget only ever goes down to what a build is.
# They are written down once, in bench/size-budgets.txt (the keys are
# docs/figures.md's), which scripts/check/check-sizes.py enforces in CI.
SIZE_BUDGETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "size-budgets.txt")


def size_budgets(path=SIZE_BUDGETS):
    """{key: (bytes, words)} of bench/size-budgets.txt: KEY BYTES [WORDS]."""
    budgets = {}
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            fields = line.split("#", 1)[0].split()
            if fields:
                budgets[fields[0]] = (int(fields[1]), " ".join(fields[2:]))
    return budgets


# Memory is counted as the process's own (private: RssAnon).
IDLE_PRIVATE_MAX = 1024
STORE_PRIVATE_MAX = 100 * 1024


def load(path):
    figures = {}
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            name, sep, value = line.rstrip("\n").partition("=")
            if sep and value != "":
                figures[name] = value
    return figures


class Budgets:
    def __init__(self, figures):
        self.f = figures
        self.rounds = int(figures["ROUNDS"])
        self.plants = figures["PLANTS"]

    def get(self, name):
        return self.f.get(name)

    def sum(self, key):
        return self.f.get("SUM." + key)

    def mean(self, key, places=2):
        return f"{float(self.f.get('SUM.' + key, 0)) / self.rounds:.{places}f}"

    @staticmethod
    def ratio(a, b):
        return "-" if float(b) == 0 else f"{float(a) / float(b):.2f}"

    @staticmethod
    def met(ok):
        return "met" if ok else "**NOT met**"

    def met_at_scale(self, ok, plants=None):
        plants = self.plants if plants is None else plants
        return self.met(ok) if plants == "1000000" else f"not judged ({plants} plants)"

    def rows(self):
        for part in (self.reference, self.footprint, self.https, self.postgres, self.storage,
                     self.writers, self.query, self.compaction, self.pinned, self.feed,
                     self.idle_connections):
            yield from part()

    def reference(self):
        for conns in (16, 64):
            ours = self.sum(f"plantstore.{conns}.rps")
            if ours is None:
                continue
            theirs = self.sum(f"reference.{conns}.rps")
            p99, ref_p99 = self.mean(f"plantstore.{conns}.p99"), self.mean(f"reference.{conns}.p99")
            yield (f"POST at {conns} connections >= 1.0x reference (mean of rounds)",
                   f"{self.ratio(ours, theirs)}x", self.met(float(ours) >= float(theirs)))
            yield (f"p99 at {conns} connections <= reference's (mean of rounds)",
                   f"{p99} vs {ref_p99} ms", self.met(float(p99) <= float(ref_p99)))

    def footprint(self):
        if self.get("IDLE") is None:
            return
        g = lambda name: int(self.get(name))  # noqa: E731
        yield ("idle private memory (RssAnon, default flags, largest of 3 starts) <= 1 MiB (1024 KiB)",
               f"{g('IDLE_ANON')} KiB in memory, {g('IDLE_DATA_ANON')} KiB with --data "
               f"(RSS {g('IDLE')} and {g('IDLE_DATA')} KiB)",
               self.met(g("IDLE_ANON") <= IDLE_PRIVATE_MAX and g("IDLE_DATA_ANON") <= IDLE_PRIVATE_MAX))
        if self.get("IDLE_STATIC"):
            yield ("idle private memory of the static build <= 1 MiB (1024 KiB)",
                   f"{g('IDLE_STATIC_ANON')} KiB (RSS {g('IDLE_STATIC')} KiB; {self.get('STATIC_TARGET')})",
                   self.met(g("IDLE_STATIC_ANON") <= IDLE_PRIVATE_MAX))
        grown = g("LOADED_ANON") - g("IDLE_ANON")
        yield (f"1,000,000 plants in <= {STORE_PRIVATE_MAX} KiB more private memory",
               f"{grown} KiB more ({g('LOADED_ANON')} KiB; RSS {g('LOADED') - g('IDLE')} KiB more)",
               self.met_at_scale(grown <= STORE_PRIVATE_MAX))
        size, https = g("SIZE"), g("HTTPS_SIZE")
        budgets = size_budgets()
        plain_max, plain_words = budgets["size.x86_64-unknown-linux-gnu.plain"]
        https_max, https_words = budgets["size.x86_64-unknown-linux-gnu"]
        if self.get("HOST") == "x86_64-unknown-linux-gnu":
            yield ("published x86_64 binary, plain build (FEATURES=plain scripts/release/release-build.sh "
                   f"x86_64-unknown-linux-gnu) <= {plain_words} ({plain_max} bytes), a ratchet",
                   f"{size} bytes", self.met(size <= plain_max))
            yield ("published x86_64 binary, HTTPS build (scripts/release/release-build.sh "
                   f"x86_64-unknown-linux-gnu) <= {https_words} ({https_max} bytes), a ratchet",
                   f"{https} bytes", self.met(https <= https_max))
        else:
            yield (f"published x86_64 binary, plain build <= {plain_words} ({plain_max} bytes)",
                   f"{size} bytes ({self.get('HOST')} build)", "not judged (not x86_64)")

    def https(self):
        if self.get("HTTPS_KEEPALIVE") is None:
            return
        keep, new, reuse = (float(self.get(n)) for n in ("HTTPS_KEEPALIVE", "HTTPS_NEW", "HTTPS_REUSE"))
        growth = int(self.get("TLS_IDLE_GROWTH"))
        yield ("HTTPS keep-alive POST at 64 connections >= 1.0x nginx with TLS 1.3, the same "
               "certificate (one core each, mean of rounds)", f"{self.get('HTTPS_KEEPALIVE')}x",
               self.met(keep >= 1.0))
        yield ("a new TLS 1.3 connection per request >= 1.5x nginx, full handshakes",
               f"{self.get('HTTPS_NEW')}x", self.met(new >= 1.5))
        yield ("a new TLS 1.3 connection per request >= 1.5x nginx, session resumption",
               f"{self.get('HTTPS_REUSE')}x", self.met(reuse >= 1.5))
        yield ("1,000 idle TLS connections add <= 16 MiB (16384 KiB)", f"{growth} KiB",
               self.met(growth <= 16384))

    def postgres(self):
        if self.get("PG_RATIO") is not None:
            ratio, cpu, pg = (self.get(n) for n in ("PG_RATIO", "PG_ONE_CPU_US", "PG_ONE_PG_US"))
            yield (f"PostgreSQL store at {self.get('PG_CONNS')} connections >= 2.5x pgbench running "
                   "its single-row INSERT (mean of rounds)", f"{ratio}x", self.met(float(ratio) >= 2.5))
            yield ("plantstore CPU per request on PostgreSQL <= 15 µs", f"{cpu} µs",
                   self.met(float(cpu) <= 15))
            yield ("PostgreSQL CPU per stored plant <= 20 µs", f"{pg} µs", self.met(float(pg) <= 20))
        if self.get("HEALTH_MAX") is not None:
            health = self.get("HEALTH_MAX")
            yield ("/healthz turns 503 and back within 1 s, stopped or frozen (slowest)",
                   f"{health} ms", self.met(float(health) <= 1000))

    def storage(self):
        durable, startup = self.get("DURABLE_RATIO"), self.get("STARTUP_MAX")
        over, restart = self.get("STARTUP_PEAK_OVER"), self.get("RESTART_MAX")
        if durable is not None:
            yield ("--sync always at 64 connections >= 0.8x in memory", f"{durable}x",
                   self.met(float(durable) >= 0.8))
        cpu = self.get("DURABLE_CPU_RATIO")
        if cpu is not None:
            yield ("--sync always at 64 connections: server CPU per request <= 1.3x in memory's",
                   f"{cpu}x", self.met(cpu != "-" and float(cpu) <= 1.3))
        never = self.get("DURABLE_NEVER_CPU_RATIO")
        if never is not None:
            yield ("--sync never at 64 connections: server CPU per request <= 1.15x in memory's "
                   "(side by side on one core: median of rounds; their range)",
                   f"{never}x ({self.get('DURABLE_NEVER_CPU_RANGE')})",
                   self.met(never != "-" and float(never) <= 1.15))
        if startup is not None:
            yield ("start-up with a journal of 1,000,000 plants < 1 s (slowest of 3)", f"{startup} ms",
                   self.met_at_scale(float(startup) < 1000))
        if over is not None:
            yield ("start-up peak RSS <= the RSS once started + 16384 KiB (largest of 3)",
                   f"+{over} KiB", self.met(float(over) <= 16384))
        if restart is not None:
            yield ("restart after a crafted torn tail of 1 MiB < 1 s (slowest of every tail and run)",
                   f"{restart} ms", self.met(float(restart) < 1000))

    def writers(self):
        if self.sum("writers.loaded.p99") is not None:
            loaded, alone = self.mean("writers.loaded.p99", 3), self.mean("writers.alone.p99", 3)
            yield ("writers' p99 under looping worst-case listings <= 1 ms, 1,000,000 plants (mean of rounds)",
                   f"{loaded} ms (alone: {alone} ms, {self.ratio(loaded, alone)}x; largest max "
                   f"{self.get('WRITERS_MAX')} ms)", self.met_at_scale(float(loaded) <= 1))
        if self.sum("writers.large.p99") is not None:
            large = self.mean("writers.large.p99", 3)
            yield ("writers' p99 under 4 loops of 256 KiB pages <= 5 ms (mean of rounds)",
                   f"{large} ms", self.met(float(large) <= 5))

    def query(self):
        if self.sum("query.memory.any.p99") is not None:
            first, any_, search = (self.mean(f"query.memory.{k}.p99") for k in ("first", "any", "search"))
            writer, order = self.mean("query.writer.p99", 3), self.get("QUERY_ORDER_BYTES")
            yield ("`?sort=name&limit=100`, any page: p99 <= 5 ms, 1,000,000 plants, memory store "
                   "(mean of rounds; pages after random plants, and the first)",
                   f"{any_} ms, first page {first} ms (first page in id order: "
                   f"{self.mean('query.memory.id.p99')} ms)",
                   self.met_at_scale(float(any_) <= 5 and float(first) <= 5))
            yield ("`?q=` matching 1 plant in 10,000, first page: p99 <= 100 ms (mean of rounds)",
                   f"{search} ms", self.met_at_scale(float(search) <= 100))
            yield ("writers' p99 while 4 clients loop that search <= 1 ms (mean of rounds)",
                   f"{writer} ms (alone: {self.mean('query.alone.p99', 3)} ms)",
                   self.met_at_scale(float(writer) <= 1))
            yield ("memory for the name order <= 48 bytes a plant",
                   f"{order} bytes ({self.get('QUERY_ORDER_HOW')})",
                   self.met_at_scale(float(order) <= 48, self.get("QUERY_ORDER_AT")))
        if self.sum("query.postgres.any.p99") is not None:
            first, any_, search = (self.mean(f"query.postgres.{k}.p99") for k in ("first", "any", "search"))
            trgm = "" if self.get("QUERY_PG_TRGM") else ", **no trigram index**"
            yield ("PostgreSQL, 1,000,000 rows: `?sort=name` page p99 <= 10 ms (mean of rounds; "
                   "after random plants, and the first)",
                   f"{any_} ms, first page {first} ms (first page in id order: "
                   f"{self.mean('query.postgres.id.p99')} ms)",
                   self.met_at_scale(float(any_) <= 10 and float(first) <= 10))
            yield ("PostgreSQL, 1,000,000 rows: `?q=` with the trigram index p99 <= 50 ms (mean of rounds)",
                   f"{search} ms{trgm}", self.met_at_scale(float(search) <= 50))

    def compaction(self):
        holds = (self.get("COMPACT_HOLDS") or "").split()
        if holds:
            # The largest round is judged: a writer waits as long as the worst hold.
            hold = max(int(h) for h in holds)
            yield ("longest store lock hold while compacting 1,000,000 plants < 5 ms (largest of rounds)",
                   f"{hold} µs (rounds: {' '.join(holds)} µs; RSS at most "
                   f"{self.get('COMPACT_PEAK_GROWTH')} KiB above before)",
                   self.met_at_scale(hold < 5000))

    def pinned(self):
        for conns in (16, 64, 1024):
            # Not with OLD: the pinned section then runs no reference or nginx.
            ours, theirs = self.sum(f"pinned.plantstore.{conns}.rps"), self.sum(f"pinned.reference.{conns}.rps")
            if ours is None or theirs is None:
                continue
            nginx = self.sum(f"pinned.nginx.{conns}.rps")
            cpu, nginx_cpu = (self.mean(f"pinned.{s}.{conns}.cpu", 1) for s in ("plantstore", "nginx"))
            ctx = self.mean(f"pinned.plantstore.{conns}.ctx", 3)
            p99, ref_p99, nginx_p99 = (self.mean(f"pinned.{s}.{conns}.p99", 3)
                                       for s in ("plantstore", "reference", "nginx"))
            yield (f"pinned, {conns} connections: requests/s >= the reference's and nginx's",
                   f"{self.ratio(ours, theirs)}x, {self.ratio(ours, nginx)}x",
                   self.met(float(ours) >= float(theirs) and float(ours) >= float(nginx)))
            yield (f"pinned, {conns} connections: p99 <= the reference's and nginx's",
                   f"{p99} vs {ref_p99} and {nginx_p99} ms",
                   self.met(float(p99) <= float(ref_p99) and float(p99) <= float(nginx_p99)))
            yield (f"pinned, {conns} connections: server CPU per request as close to nginx's as it gets "
                   "(aim 0.9x)", f"{cpu} vs {nginx_cpu} µs ({self.ratio(cpu, nginx_cpu)}x)",
                   "aim " + self.met(float(cpu) <= 0.9 * float(nginx_cpu)))
            yield (f"pinned, {conns} connections: context switches per request < 0.1", ctx,
                   self.met(float(ctx) < 0.1))

    def feed(self):
        ratio = self.get("FEED_IDLE_RATIO")
        if ratio is None:
            return
        complete, delay = self.get("FEED_COMPLETE") == "1", self.get("FEED_DELAY_P99")
        yield ("POST at 64 connections with 100 idle feed subscribers (following another tag) >= 0.9x "
               "without (sum of rounds)", f"{ratio}x", self.met(float(ratio) >= 0.9))
        yield ("every subscriber gets every event: 100 at 5,000 changes/s, 1,000 at 500/s",
               "all" if complete else "not all", self.met(complete))
        yield ("a change reaches a subscriber within 1 s (p99, slowest run)", f"{delay} ms",
               self.met(float(delay) <= 1000))

    def idle_connections(self):
        growth = self.get("HOLD_GROWTH")
        if growth is None:
            return
        held, conns, p99 = self.get("HOLD_HELD"), self.get("IDLE_CONNS"), self.get("HOLD_P99")
        yield (f"{conns} idle connections in <= 20480 KiB more RSS (all held)",
               f"{growth} KiB, {held} held", self.met(held == conns and int(growth) <= 20480))
        yield ("a fresh client's p99 < 10 ms with them open", f"{p99} ms", self.met(float(p99) < 10))


def main(argv):
    if len(argv) != 2:
        raise SystemExit("usage: bench/budgets.py FIGURES")
    print("## Budgets (this run)")
    print()
    print("| budget | measured | |")
    print("|---|---|---|")
    for budget, measured, verdict in Budgets(load(argv[1])).rows():
        print(f"| {budget} | {measured} | {verdict} |")
    print()


if __name__ == "__main__":
    main(sys.argv)

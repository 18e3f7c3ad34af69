"""A flood of wrong tokens from 100 addresses, 100 requests a second in
all, against a server with its default failure limits, and what it leaves
of the service to three clients: one that used its right token before the
flood, on a new connection for each request and on one kept-alive
connection, and one new to the server. Loopback only: each client binds
its own 127.x.y.z.

Usage: bench/flood.py ADDR TOKEN SECONDS. Fills the server-wide limit
first (at most 60 s), then floods and measures for SECONDS; prints one
markdown row per client: requests, 200s, the share served, 429s by
message. Run by bench/sections/hostile.sh.
"""

import sys
import threading
import time

from loopback import connect, get

RATE = 100  # flood requests a second, in all
ADDRESSES = 100


def ask(addr, source, token, conn=None):
    """GET /plants with `token` from `source` (a new connection unless
    `conn`); (status, body, connection to reuse or None)."""
    conn = conn or connect(addr, source)
    status, body, keep = get(conn, "/plants?limit=1", token)
    return status, body, conn if keep else None


def flood(addr, stop):
    """Wrong tokens from ADDRESSES addresses in turn, RATE a second."""
    n, started = 0, time.monotonic()
    while not stop.is_set():
        source = f"127.3.0.{n % ADDRESSES + 1}"
        try:
            _, _, conn = ask(addr, source, "wrong-token-guess")
            if conn:
                conn.close()
        except OSError:
            pass
        n += 1
        time.sleep(max(0.0, started + n / RATE - time.monotonic()))


def measure(addr, source, token, seconds, keep_alive, results):
    counts = {"requests": 0, "200": 0, "address": 0, "server-wide": 0, "other": 0}
    conn, end = None, time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            status, body, conn = ask(addr, source, token, conn if keep_alive else None)
        except OSError:
            status, body, conn = 0, "", None
        counts["requests"] += 1
        if status == 200:
            counts["200"] += 1
        elif status == 429 and "server-wide" in body:
            counts["server-wide"] += 1
        elif status == 429:
            counts["address"] += 1
        else:
            counts["other"] += 1
        if not keep_alive and conn:
            conn.close()
        time.sleep(0.1)
    results[source] = counts


def main():
    addr, token, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    clients = [("known, a new connection each", "127.0.0.3", True, False),
               ("known, one connection", "127.0.0.5", True, True),
               ("new to the server", "127.0.0.4", False, False)]
    for _, source, known, _ in clients:
        if known:
            status, body, conn = ask(addr, source, token)
            assert status == 200, (status, body)
            if conn:
                conn.close()
    stop = threading.Event()
    flooder = threading.Thread(target=flood, args=(addr, stop))
    flooder.start()
    # Until the server-wide limit refuses (the flood's own 429s).
    deadline, probe = time.monotonic() + 60, 0
    while time.monotonic() < deadline:
        probe += 1
        source = f"127.3.{1 + probe // 250}.{probe % 250 + 1}"
        status, body, conn = ask(addr, source, "wrong-token-probe")
        if conn:
            conn.close()
        if status == 429 and "server-wide" in body:
            break
        time.sleep(0.2)
    results = {}
    threads = [threading.Thread(target=measure, args=(addr, source, token, seconds, keep, results))
               for _, source, _, keep in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    flooder.join()
    for label, source, _, _ in clients:
        c = results[source]
        share = 100.0 * c["200"] / max(1, c["requests"])
        print(f"| {label} | {c['requests']} | {c['200']} | {share:.1f}% | "
              f"{c['server-wide']} | {c['address']} | {c['other']} |")


if __name__ == "__main__":
    main()

"""Searches shared between clients: how late one client's searches are
while another loops them, against the same searches alone. Loopback only:
each client binds its own 127.x.y.z.

Usage: bench/fair.py ADDR TOKEN SECONDS HOG_CONNS. The victim (127.0.0.7)
sends one rare search every 100 ms for SECONDS alone, then again while a
hog (127.0.0.6) loops the same search on HOG_CONNS connections; prints one
markdown row: the victim's p50 and max alone and beside the hog, the hog's
searches served a second and its 503s. Run by bench/sections/hostile.sh.
"""

import sys
import threading
import time

from loopback import connect, get

SEARCH = "/plants?q=zq-rare-search&limit=10"


def ask(conn, token):
    """One search on `conn`: its status."""
    return get(conn, SEARCH, token)[0]


def victim(addr, token, seconds):
    """Latencies (ms) of one search every 100 ms."""
    conn, took, end = connect(addr, "127.0.0.7", 60), [], time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.monotonic()
        status = ask(conn, token)
        assert status == 200, status
        took.append((time.monotonic() - started) * 1000)
        time.sleep(max(0.0, 0.1 - (time.monotonic() - started)))
    return sorted(took)


def hog(addr, token, stop, counts):
    conn = connect(addr, "127.0.0.6", 60)
    while not stop.is_set():
        status = ask(conn, token)
        counts[status] = counts.get(status, 0) + 1


def main():
    addr, token, seconds, hogs = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    alone = victim(addr, token, seconds)
    stop, counts = threading.Event(), {}
    hogs = [threading.Thread(target=hog, args=(addr, token, stop, counts)) for _ in range(hogs)]
    for h in hogs:
        h.start()
    time.sleep(0.5)
    started = time.monotonic()
    beside = victim(addr, token, seconds)
    elapsed = time.monotonic() - started
    stop.set()
    for h in hogs:
        h.join()
    p50 = lambda xs: xs[len(xs) // 2]
    print(f"| {p50(alone):.1f} | {alone[-1]:.1f} | {p50(beside):.1f} | {beside[-1]:.1f} | "
          f"{counts.get(200, 0) / elapsed:.0f} | {counts.get(503, 0)} |")


if __name__ == "__main__":
    main()

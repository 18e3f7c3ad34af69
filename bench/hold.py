#!/usr/bin/env python3
"""Holds N idle keep-alive connections open, for bench/run.sh.

    bench/hold.py HOST:PORT N [PATH]    (PATH default /healthz)

Opens N connections (at most 256 handshakes or requests in flight at once,
so the server's listen backlog never overflows), sends each one
`GET PATH` over HTTP/1.1 keep-alive and reads its whole reply (any status
counts: the reference server answers 404 to /healthz), then leaves every
connection open and idle. Prints `ready HELD FAILED` once all N are done,
then waits until SIGTERM or SIGINT, and prints `closed K`: how many of the
held connections the server had closed meanwhile. Needs an open-file limit
above N.
"""

import errno
import selectors
import signal
import socket
import sys
import time

IN_FLIGHT = 256
TIMEOUT_S = 60


def reply_length(buf):
    """Bytes of the first complete reply in buf, or None while incomplete."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    length = 0
    for line in buf[:end].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    if len(buf) < end + 4 + length:
        return None
    return end + 4 + length


class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.sent = False
        self.buf = b""


def main():
    host, _, port = sys.argv[1].rpartition(":")
    total = int(sys.argv[2])
    path = sys.argv[3] if len(sys.argv) > 3 else "/healthz"
    request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))

    sel = selectors.DefaultSelector()
    held, failed, started = [], 0, 0
    deadline = time.monotonic() + TIMEOUT_S
    while (started < total or sel.get_map()) and not stop:
        while started < total and len(sel.get_map()) < IN_FLIGHT:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            err = sock.connect_ex((host, int(port)))
            started += 1
            if err not in (0, errno.EINPROGRESS):
                sock.close()
                failed += 1
                continue
            sel.register(sock, selectors.EVENT_WRITE, Conn(sock))
        if time.monotonic() > deadline:
            break
        for key, _ in sel.select(timeout=1):
            conn = key.data
            try:
                if not conn.sent:
                    err = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        raise OSError(err, "connect")
                    conn.sock.sendall(request)  # small: fits the socket buffer
                    conn.sent = True
                    sel.modify(conn.sock, selectors.EVENT_READ, conn)
                    continue
                data = conn.sock.recv(65536)
                if not data:
                    raise OSError("closed before the reply")
                conn.buf += data
                if reply_length(conn.buf) is None:
                    continue
                sel.unregister(conn.sock)
                held.append(conn.sock)
            except (OSError, ValueError):
                sel.unregister(conn.sock)
                conn.sock.close()
                failed += 1
    for key in list(sel.get_map().values()):  # timed out or stopped
        sel.unregister(key.fileobj)
        key.fileobj.close()
        failed += 1
    failed += total - started
    print(f"ready {len(held)} {failed}", flush=True)

    while not stop:
        time.sleep(0.5)
    closed = 0
    for sock in held:
        try:
            if sock.recv(1, socket.MSG_PEEK) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    print(f"closed {closed}", flush=True)


if __name__ == "__main__":
    main()

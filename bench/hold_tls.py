#!/usr/bin/env python3
"""Holds N idle keep-alive HTTPS connections open, for bench/run.sh.

    bench/hold_tls.py HOST:PORT N CAFILE

Opens N TLS connections one after the other (the certificate verified
against CAFILE, the host name not: the bench's certificate is for
localhost), sends each one `GET /healthz` over HTTP/1.1 keep-alive and
reads its reply, then leaves every connection open and idle. Prints
`ready HELD FAILED` once all N are done, then waits until SIGTERM or
SIGINT, and prints `closed K`: how many of the held connections the
server had closed meanwhile. Needs an open-file limit above N.
"""

import signal
import socket
import ssl
import sys
import time


def main():
    host, _, port = sys.argv[1].rpartition(":")
    total, cafile = int(sys.argv[2]), sys.argv[3]
    context = ssl.create_default_context(cafile=cafile)
    context.check_hostname = False
    request = f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))

    held, failed = [], 0
    for _ in range(total):
        try:
            raw = socket.create_connection((host, int(port)), timeout=10)
            conn = context.wrap_socket(raw, server_hostname="localhost")
            conn.sendall(request)
            reply = b""
            while b"\r\n\r\n" not in reply:
                chunk = conn.recv(4096)
                if not chunk:
                    raise OSError("closed")
                reply += chunk
            held.append(conn)
        except OSError:
            failed += 1
    print(f"ready {len(held)} {failed}", flush=True)

    while not stop:
        time.sleep(0.1)
    closed = 0
    for conn in held:
        conn.setblocking(False)
        try:
            if conn.recv(1) == b"":
                closed += 1
        except ssl.SSLWantReadError:
            pass
        except (ssl.SSLError, OSError):
            closed += 1
    print(f"closed {closed}", flush=True)


if __name__ == "__main__":
    main()

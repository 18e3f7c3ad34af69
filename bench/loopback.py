"""A minimal HTTP/1.1 client for the bench scripts that play several
clients on loopback (bench/flood.py, bench/fair.py): each connection binds
its own 127.x.y.z source address, so the server tells the clients apart.
"""

import socket


def connect(addr, source, timeout=10):
    """A connection to ADDR (host:port) from the loopback address `source`."""
    host, port = addr.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=timeout, source_address=(source, 0))


def get(conn, target, token):
    """GET `target` with the bearer `token` on `conn`: (status, body, whether
    the server keeps the connection). The body is read by its length."""
    conn.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        body += chunk
    keep = b"connection: close" not in head.lower()
    return int(head.split(b" ")[1]), body.decode(errors="replace"), keep

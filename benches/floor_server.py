#!/usr/bin/env python3
"""The floor for benches/compare.sh: a trivial blocking HTTP/1.1 server.

Single thread, one connection at a time, keep-alive. Every request gets the
same fixed bytes: a 200 with the given Content-Type, a Content-Length, and
the body read once from BODY_FILE (a real gpu-exporter scrape). Nothing is
parsed beyond the blank line that ends each request head, so this is what
sending those bytes costs on this machine and no exporter can beat it.

    python3 benches/floor_server.py PORT BODY_FILE [CONTENT_TYPE]
"""

import signal
import socket
import sys


def main():
    port = int(sys.argv[1])
    with open(sys.argv[2], "rb") as f:
        body = f.read()
    ctype = sys.argv[3] if len(sys.argv) > 3 else "text/plain; version=0.0.4; charset=utf-8"
    response = (
        f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(16)
    print(f"serving {len(response)} fixed bytes on http://127.0.0.1:{port}/metrics", flush=True)
    while True:
        conn, _ = listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pending = b""
        with conn:
            try:
                while True:
                    data = conn.recv(65536)
                    if not data:
                        break
                    pending += data
                    # One answer per complete request head (pipelining too).
                    while (end := pending.find(b"\r\n\r\n")) >= 0:
                        pending = pending[end + 4 :]
                        conn.sendall(response)
            except OSError:
                pass


if __name__ == "__main__":
    main()

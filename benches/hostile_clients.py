#!/usr/bin/env python3
"""Hostile and well-behaved HTTP clients for benches/hostile.sh.

  hostile_clients.py never-readers PORT COUNT SECONDS
      COUNT connections that each pipeline 200 GET /metrics with a 4 KiB
      receive buffer and never read a byte. A connection the server closes
      is opened again (checked every 200 ms), so COUNT stay open. Prints
      how many times connections were opened.

  hostile_clients.py flood PORT COUNT SECONDS
      COUNT keep-alive connections at once, each asking GET /metrics again
      as soon as its answer (by Content-Length) is read, a closed one
      opened again, for SECONDS: wrk's flood without wrk. Prints how many
      responses were read and how many connections opened.

  hostile_clients.py scrape PORT COUNT TIMEOUT
      One scrape a second, COUNT times, as a scraper with a TIMEOUT-second
      scrape timeout: a new connection, GET /metrics with Prometheus'
      Accept header and Connection: close, success when the whole 200
      response (by Content-Length, chunked or to the close) arrives within
      TIMEOUT seconds of the start. Prints one line of key=value results.

Only the standard library; 127.0.0.1 only.
"""
import socket
import sys
import time

HOST = "127.0.0.1"
ACCEPT = (
    "application/openmetrics-text;version=1.0.0;q=0.5,"
    "application/openmetrics-text;version=0.0.1;q=0.4,"
    "text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
)


def never_readers(port, count, seconds):
    burst = (b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n") * 200

    def opened():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.setblocking(False)
        try:
            s.connect((HOST, port))
        except BlockingIOError:
            pass
        return [s, burst]

    socks = [opened() for _ in range(count)]
    opens = count
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for i, entry in enumerate(socks):
            s, pending = entry
            try:
                if pending:
                    n = s.send(pending)
                    entry[1] = pending[n:]
                else:
                    # Closed by the server? A write to it fails soon after.
                    s.send(b"\r\n")
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                s.close()
                socks[i] = opened()
                opens += 1
        time.sleep(0.2)
    for s, _ in socks:
        s.close()
    print(f"never-readers opens={opens}")


def flood(port, count, seconds):
    import selectors
    req = b"GET /metrics HTTP/1.1\r\nHost: flood\r\n\r\n"
    sel, buf = selectors.DefaultSelector(), bytearray(1 << 16)
    state = {"opens": 0, "responses": 0}

    def opened():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex((HOST, port))
        state["opens"] += 1
        # [request bytes left to send, head read so far, body bytes left]
        sel.register(s, selectors.EVENT_WRITE, [req, b"", None])

    def again(s, conn):
        conn[:] = [req, b"", None]
        sel.modify(s, selectors.EVENT_WRITE, conn)

    def step(s, conn):
        if conn[0]:
            conn[0] = conn[0][s.send(conn[0]):]
            if not conn[0]:
                sel.modify(s, selectors.EVENT_READ, conn)
            return
        n = s.recv_into(buf)
        if n == 0:
            raise OSError("closed")
        if conn[2] is None:
            conn[1] += bytes(buf[:n])
            if b"\r\n\r\n" not in conn[1]:
                return
            head, body = conn[1].split(b"\r\n\r\n", 1)
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            conn[2] = length - len(body)
        else:
            conn[2] -= n
        if conn[2] <= 0:
            state["responses"] += 1
            again(s, conn)

    for _ in range(count):
        opened()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for key, _ in sel.select(timeout=0.2):
            try:
                step(key.fileobj, key.data)
            except (BlockingIOError, InterruptedError):
                pass
            except (OSError, ValueError, IndexError):
                sel.unregister(key.fileobj)
                key.fileobj.close()
                opened()
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    print(f"flood responses={state['responses']} opens={state['opens']}")


def scrape_once(port, timeout):
    start = time.monotonic()
    deadline = start + timeout
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect((HOST, port))
        s.sendall(
            f"GET /metrics HTTP/1.1\r\nHost: {HOST}:{port}\r\nAccept: {ACCEPT}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        # Connection: close: the response ends where the stream does.
        buf = b""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout", None
            s.settimeout(left)
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        if b"\r\n\r\n" not in buf:
            return "closed" if not buf else "short", None
        head, body = buf.split(b"\r\n\r\n", 1)
        status = head.split(b" ", 2)[1]
        if status != b"200":
            return "status_" + status.decode(), None
        fields = {}
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            fields[k.strip().lower()] = v.strip().lower()
        if b"content-length" in fields:
            complete = len(body) == int(fields[b"content-length"])
        elif fields.get(b"transfer-encoding") == b"chunked":
            complete = body.endswith(b"0\r\n\r\n")
        else:
            complete = True
        if not complete:
            return "short", None
        return "ok", time.monotonic() - start
    except socket.timeout:
        return "timeout", None
    except OSError as e:
        return type(e).__name__, None
    finally:
        s.close()


def scrape(port, count, timeout):
    outcomes = {}
    times = []
    next_at = time.monotonic()
    for _ in range(count):
        outcome, took = scrape_once(port, timeout)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if took is not None:
            times.append(took)
        next_at += 1.0
        time.sleep(max(0.0, next_at - time.monotonic()))
    times.sort()
    ok = outcomes.get("ok", 0)

    def pct(p):
        return f"{times[min(len(times) - 1, int(p * len(times)))] * 1000:.1f}" if times else "-"

    failures = ",".join(f"{k}:{v}" for k, v in sorted(outcomes.items()) if k != "ok") or "none"
    print(f"scrapes={count} ok={ok} rate={100.0 * ok / count:.1f} p50_ms={pct(0.5)} "
          f"p99_ms={pct(0.99)} failures={failures}")


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("never-readers", "flood", "scrape"):
        sys.exit(__doc__)
    port, count = int(sys.argv[2]), int(sys.argv[3])
    if sys.argv[1] == "never-readers":
        never_readers(port, count, float(sys.argv[4]))
    elif sys.argv[1] == "flood":
        flood(port, count, float(sys.argv[4]))
    else:
        scrape(port, count, float(sys.argv[4]))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A fake kubelet: the pod-resources v1 gRPC service, served by real grpcio
on a unix socket, with the pods taken from a JSON file, and ways to
misbehave.

    fake_kubelet.py --socket PATH --pods PODS.json [--mode MODE] ...

PODS.json is a ListPodResourcesResponse in protobuf's JSON mapping
({"podResources": [...]}, field names as in api.proto or lowerCamelCase).

Modes:
  serve       answer List (Get and GetAllocatableResources: UNIMPLEMENTED)
  error       answer List with UNAVAILABLE (a trailers-only response)
  hang        accept the call and never answer it (grpcio still ends it
              with DEADLINE_EXCEEDED when the client's grpc-timeout passes)
  silent      listen on the socket but never accept a connection
  garbage     accept, then write bytes that are not HTTP/2 (--garbage:
              random, an HTTP/1.1 reply, or frames with a broken header
              block), and close
  close-mid   a real server behind a relay that cuts the connection once
              --close-after bytes of the response have passed
  stall-mid   the same relay, but it goes quiet instead, with the
              connection left open
  restart     the first List call stops the server with the call in
              flight; it comes back on the same socket --restart-delay
              seconds later and answers normally

--filler-bytes N pads the response with about N bytes of CPU-only pods
(half before the listed pods, half after) to test big answers; gRPC's
default 4 MiB send limit is lifted for that.

The stubs are generated at start from api.proto beside this file into a
temporary directory, so no generated code is kept. "READY" is printed on
stdout once the socket accepts calls.
"""

import argparse
import atexit
import json
import os
import random
import shutil
import socket
import sys
import tempfile
import threading
import time
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))
SERVICE = "v1.PodResourcesLister"
MAX_MESSAGE = 256 << 20


def load_stubs():
    """Generates api_pb2 and api_pb2_grpc from api.proto and imports them."""
    from grpc_tools import protoc

    out = tempfile.mkdtemp(prefix="fake-kubelet-stubs-")
    atexit.register(shutil.rmtree, out, True)
    rc = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{HERE}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            os.path.join(HERE, "api.proto"),
        ]
    )
    if rc != 0:
        sys.exit(f"fake_kubelet: protoc failed ({rc})")
    sys.path.insert(0, out)
    import api_pb2  # noqa: E402
    import api_pb2_grpc  # noqa: E402

    return api_pb2, api_pb2_grpc


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def response_bytes(api_pb2, pods_file, filler_bytes):
    """The serialized ListPodResourcesResponse: the listed pods, wrapped in
    filler. Repeated-field entries concatenate, so the filler is one
    serialized CPU pod repeated, which is fast even for 64 MiB."""
    from google.protobuf import json_format

    with open(pods_file) as f:
        doc = json.load(f)
    listed = json_format.ParseDict(doc, api_pb2.ListPodResourcesResponse())
    body = listed.SerializeToString()
    if filler_bytes <= 0:
        return body
    pod = api_pb2.PodResources(name="filler-cpu-pod", namespace="default")
    c = pod.containers.add(name="app")
    c.cpu_ids.extend([2, 3])
    d = c.devices.add(resource_name="example.com/nic")
    d.device_ids.append("0")
    raw = pod.SerializeToString()
    entry = b"\x0a" + varint(len(raw)) + raw
    count = max(1, filler_bytes // len(entry))
    half = entry * (count // 2)
    return half + body + entry * (count - count // 2)


def new_server(api_pb2, socket_path, handler):
    import grpc

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=4),
        options=[
            ("grpc.max_send_message_length", MAX_MESSAGE),
            ("grpc.max_receive_message_length", MAX_MESSAGE),
        ],
    )
    methods = {
        "List": grpc.unary_unary_rpc_method_handler(
            handler,
            request_deserializer=api_pb2.ListPodResourcesRequest.FromString,
            # The handler returns bytes already serialized.
            response_serializer=lambda b: b,
        )
    }
    # Get and GetAllocatableResources are not registered: UNIMPLEMENTED.
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, methods),))
    if os.path.exists(socket_path):
        os.unlink(socket_path)
    server.add_insecure_port("unix:" + socket_path)
    server.start()
    return server


def ready():
    print("READY", flush=True)


def serve_grpc(args, api_pb2, payload):
    import grpc

    state = {"server": None, "restarted": False}
    stop = threading.Event()

    def restart():
        # Stop with the call in flight, as a kubelet restart does.
        state["server"].stop(grace=0).wait()
        time.sleep(args.restart_delay)
        state["server"] = new_server(api_pb2, args.socket, handler)
        state["restarted"] = True

    def handler(_request, context):
        if args.mode == "error":
            context.abort(grpc.StatusCode.UNAVAILABLE, "kubelet is busy: try later")
        if args.mode == "hang":
            done = threading.Event()
            context.add_callback(done.set)
            done.wait(300)
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "hung")
        if args.mode == "restart" and not state["restarted"]:
            done = threading.Event()
            context.add_callback(done.set)
            threading.Thread(target=restart, daemon=True).start()
            done.wait(30)
            context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")
        return payload

    socket_path = args.socket
    relayed = args.mode in ("close-mid", "stall-mid")
    if relayed:
        socket_path = args.socket + ".inner"
    state["server"] = new_server(api_pb2, socket_path, handler)
    if relayed:
        threading.Thread(target=relay, args=(args, socket_path), daemon=True).start()
        wait_for_socket(args.socket)
    ready()
    try:
        stop.wait(args.lifetime)
    except KeyboardInterrupt:
        pass


def listener(path):
    if os.path.exists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(16)
    return s


def wait_for_socket(path):
    for _ in range(200):
        if os.path.exists(path):
            return
        time.sleep(0.01)


def relay(args, inner):
    """Accepts on the public socket and pipes each connection to the real
    server; once --close-after response bytes passed, it cuts both sides
    (close-mid) or stops forwarding (stall-mid)."""
    lst = listener(args.socket)
    while True:
        client, _ = lst.accept()
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.connect(inner)

        def up(c=client, u=upstream):
            try:
                while True:
                    b = c.recv(65536)
                    if not b:
                        break
                    u.sendall(b)
            except OSError:
                pass

        def down(c=client, u=upstream):
            sent = 0
            try:
                while sent < args.close_after:
                    b = u.recv(min(65536, args.close_after - sent))
                    if not b:
                        break
                    c.sendall(b)
                    sent += len(b)
            except OSError:
                pass
            if args.mode == "stall-mid":
                # Quiet, with both connections held open.
                time.sleep(args.lifetime)
            for s in (c, u):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

        threading.Thread(target=up, daemon=True).start()
        threading.Thread(target=down, daemon=True).start()


def serve_raw(args):
    lst = listener(args.socket)
    ready()
    if args.mode == "silent":
        # Connections wait in the backlog, never accepted.
        time.sleep(args.lifetime)
        return
    rng = random.Random(15)
    deadline = time.time() + args.lifetime
    while time.time() < deadline:
        conn, _ = lst.accept()
        conn.settimeout(2)
        try:
            conn.recv(65536)
        except OSError:
            pass
        if args.garbage == "http1":
            # What an HTTP/1.1 server says to an HTTP/2 preface.
            junk = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        elif args.garbage == "hpack":
            # Well-formed frames around a header block that is not HPACK:
            # an empty SETTINGS, then HEADERS (END_HEADERS) on stream 1.
            block = rng.randbytes(64)
            junk = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
            junk += len(block).to_bytes(3, "big") + b"\x01\x04\x00\x00\x00\x01" + block
        else:
            junk = rng.randbytes(4096)
        try:
            conn.sendall(junk)
        except OSError:
            pass
        conn.close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--socket", required=True)
    p.add_argument("--pods", help="ListPodResourcesResponse as JSON")
    p.add_argument(
        "--mode",
        default="serve",
        choices=["serve", "error", "hang", "silent", "garbage", "close-mid", "stall-mid", "restart"],
    )
    p.add_argument("--filler-bytes", type=int, default=0)
    p.add_argument("--close-after", type=int, default=100_000)
    p.add_argument("--garbage", choices=["random", "http1", "hpack"], default="random")
    p.add_argument("--restart-delay", type=float, default=0.3)
    p.add_argument("--lifetime", type=float, default=600, help="seconds before exiting on its own")
    args = p.parse_args()

    if args.mode in ("silent", "garbage"):
        serve_raw(args)
        return
    if not args.pods:
        p.error("--pods is required in this mode")
    api_pb2, _ = load_stubs()
    payload = response_bytes(api_pb2, args.pods, args.filler_bytes)
    serve_grpc(args, api_pb2, payload)


if __name__ == "__main__":
    main()

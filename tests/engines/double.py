#!/usr/bin/env python3
"""An inference engine's /metrics, built with PyPI prometheus_client (the
library vLLM, SGLang, TensorRT-LLM and NIM use) from the facts in
../shared/ENGINES.md: the exact names, labels, units and default buckets.
Triton uses prometheus-cpp, whose text the double writes by hand.

  double.py --engine vllm|vllm-v0|sglang|sglang-old|trtllm|nim|triton|vllm-custom
            [--mode steady|grow|hang|garbage|huge] [--observe MS:N ...]
            [--model NAME] [--outcomes REASON:N ...] [--delay S] [--reads FILE]
            [--triton-models NAME[=MS,MS...] ...]

It serves on 127.0.0.1 at a port of its own and prints `PORT <n>` once
listening. `--observe 100:97 270:2 600:1` records 97 requests at 100 ms,
2 at 270 ms and 1 at 600 ms before serving; the counts never change after,
so what an exporter reads is exact; `--mode grow` records them again every
100 ms, a steady flow of that mix. `--outcomes stop:99 error:1` counts
requests by how they ended, with each engine's own counters (vLLM's
finished_reason, SGLang's aborted of all, trtllm-serve's 5xx errors, NIM's
failures, Triton's failure reasons), once and again with each grow.
`--history 600:50000` records that mix once, before serving, and never
again: a replica's lifetime counts from before the exporter watched it.
`--hostile N` (vllm) also serves N models a tenant named: 10 KB names
holding NUL, ESC, DEL and CR (prometheus_client escapes only backslash,
newline and quote), each with a failed request, and one at 600 ms each time outcomes are counted.
`--long N` (vllm) the same with N names of 128 bytes holding `--model`'s, which are served.
`sglang-old` is SGLang 0.3.6/0.4.0 (TTFT bounds 0.25 and 0.5 about 0.3 s,
`model_name` its only label). `--triton-models a=50,250,1000 b` (triton)
serves several models, each with its own TTFT bounds in ms (a model's
config.pbtxt `histogram_options.buckets`), the defaults where none are
given, each recording the --observe mix.
`--no-ttft` (vllm) counts outcomes with no TTFT series. `--delay 1` answers each read a second after it came; `--reads FILE` adds a
line to FILE as each read comes, so that a test counts them exactly. It
exits after --lifetime seconds."""
import argparse, sys, threading, time
from wsgiref.simple_server import make_server, WSGIRequestHandler
from prometheus_client import CollectorRegistry, Counter, Histogram, Gauge
from prometheus_client.exposition import generate_latest

VLLM_TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
             2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
VLLM_V0_TTFT = VLLM_TTFT[:16]
SGLANG_TTFT = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
SGLANG_036_TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                   2.5, 5.0, 7.5, 10.0, 15.0, 20.0, 25.0, 30.0]
TRITON_TTFT_MS = [100, 500, 2000, 5000]
CUSTOM = [0.1, 0.2, 0.3, 0.5, 1.0, 2.5]
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
NO_TTFT = False
HOSTILE = []


def observe(children, observations):
    for i, (ms, n) in enumerate(observations if children else []):
        for _ in range(n):
            children[i % len(children)].observe(ms / 1000.0)


def registry(engine, observations):
    reg = CollectorRegistry()
    if engine in ("vllm", "vllm-custom"):
        labels = ["model_name", "engine"]
        buckets = CUSTOM if engine == "vllm-custom" else VLLM_TTFT
        ttft = Histogram("vllm:time_to_first_token_seconds", "TTFT", labels,
                         buckets=buckets, registry=reg)
        ok = Counter("vllm:request_success", "Finished requests", labels + ["finished_reason"],
                     registry=reg)
        Gauge("vllm:kv_cache_usage_perc", "KV", labels, registry=reg).labels(MODEL, "0").set(0.4)
        # Two data-parallel engines: the exporter sums them per model; none
        # with --no-ttft (the counters alone, the histogram's head only).
        children = [] if NO_TTFT else [ttft.labels(MODEL, "0"), ttft.labels(MODEL, "1")]
        hostile = [ttft.labels(name, "0") for name in HOSTILE]
        for name in HOSTILE:
            ok.labels(name, "0", "error").inc()
        for r in ("stop", "length", "abort", "error", "repetition"):
            ok.labels(MODEL, "0", r)
        count = lambda reason, n: ok.labels(MODEL, "0", reason).inc(n)
    elif engine == "vllm-v0":
        ttft = Histogram("vllm:time_to_first_token_seconds", "TTFT", ["model_name"],
                         buckets=VLLM_V0_TTFT, registry=reg)
        Gauge("vllm:gpu_cache_usage_perc", "KV", ["model_name"], registry=reg).labels(MODEL).set(0.4)
        # v0: stop, length, abort; no `error` reason.
        ok = Counter("vllm:request_success", "Finished requests", ["model_name", "finished_reason"],
                     registry=reg)
        count = lambda reason, n: ok.labels(MODEL, reason).inc(n)
        children = [ttft.labels(MODEL)]
    elif engine in ("sglang", "sglang-old"):
        old = engine == "sglang-old"
        labels = ["model_name"] if old else ["model_name", "engine_type", "is_streaming"]
        values = [MODEL] if old else [MODEL, "unified", "true"]
        ttft = Histogram("sglang:time_to_first_token_seconds", "TTFT", labels,
                         buckets=SGLANG_036_TTFT if old else SGLANG_TTFT, registry=reg)
        total = Counter("sglang:num_requests", "Requests", labels, registry=reg)
        total.labels(*values)
        aborted = Counter("sglang:num_aborted_requests", "Aborted", labels[:2], registry=reg)
        aborted.labels(*values[:2])

        def count(reason, n):
            total.labels(*values).inc(n)
            if reason in ("abort", "error"):
                aborted.labels(*values[:2]).inc(n)
        children = [ttft.labels(*values)] if old else \
            [ttft.labels(MODEL, "unified", "true"), ttft.labels(MODEL, "unified", "false")]
    elif engine == "trtllm":
        labels = ["model_name", "engine_type"]
        ttft = Histogram("trtllm_time_to_first_token_seconds", "TTFT", labels,
                         buckets=VLLM_TTFT, registry=reg)
        ok = Counter("trtllm_request_success", "Finished", labels + ["finished_reason"], registry=reg)
        err = Counter("trtllm_request_error", "Errors", labels + ["http_code"], registry=reg)

        def count(reason, n):
            if reason == "error":
                err.labels(MODEL, "pytorch", "500").inc(n)
            elif reason == "client_error":
                err.labels(MODEL, "pytorch", "400").inc(n)
            else:
                ok.labels(MODEL, "pytorch", reason).inc(n)
        children = [ttft.labels(MODEL, "pytorch")]
    elif engine == "nim":
        ttft = Histogram("time_to_first_token_seconds", "TTFT", ["model_name"],
                         buckets=VLLM_V0_TTFT, registry=reg)
        ok = Counter("request_success", "Requests", ["model_name"], registry=reg)
        ok.labels(MODEL)
        failed = Counter("request_failure", "Failed", ["model_name"], registry=reg)
        count = lambda reason, n: (failed if reason == "error" else ok).labels(MODEL).inc(n)
        children = [ttft.labels(MODEL)]
    else:
        raise SystemExit(f"no prometheus_client profile for {engine}")
    observe(children, observations)
    if engine in ("vllm", "vllm-custom"):
        count = with_hostile(count, hostile)
    return (lambda: generate_latest(reg)), children, count


def with_hostile(count, hostile):
    """`count`, which also records a slow request for each hostile model."""
    def both(reason, n):
        for child in hostile:
            child.observe(0.6)
        count(reason, n)
    return both


class Triton:
    """prometheus-cpp's text for Triton with histogram_latencies=true: each
    model of `models` (name, bounds in ms) records `observations` at each
    tick, and counts `outcomes` by failure reason."""

    def __init__(self, models, observations, outcomes):
        self.models = [(name, buckets, [0] * len(buckets)) for name, buckets in models]
        self.observations, self.outcomes = observations, outcomes
        self.total, self.total_ms = {}, {}
        self.tick()

    def tick(self):
        for name, buckets, counts in self.models:
            for ms, n in self.observations:
                for i, b in enumerate(buckets):
                    counts[i] += n if ms <= b else 0
                self.total[name] = self.total.get(name, 0) + n
                self.total_ms[name] = self.total_ms.get(name, 0) + ms * n

    def body(self):
        failed = {r: sum(n for o, n in self.outcomes if o == r)
                  for r in ("REJECTED", "CANCELED", "BACKEND", "OTHER")}
        lines = [
            "# HELP nv_inference_request_success Number of successful inference requests, all batch sizes",
            "# TYPE nv_inference_request_success counter",
        ]
        lines += [f'nv_inference_request_success{{model="{m}",version="1"}} {self.total[m]}'
                  for m, _, _ in self.models]
        lines += [
            "# HELP nv_inference_request_failure Number of failed inference requests, all batch sizes",
            "# TYPE nv_inference_request_failure counter",
        ]
        lines += [f'nv_inference_request_failure{{model="{m}",reason="{r}",version="1"}} {n}'
                  for m, _, _ in self.models for r, n in failed.items()]
        lines += [
            "# HELP nv_inference_first_response_histogram_ms Duration from request to first response in milliseconds",
            "# TYPE nv_inference_first_response_histogram_ms histogram",
        ]
        for m, buckets, counts in self.models:
            lines += [f'nv_inference_first_response_histogram_ms_count{{model="{m}",version="1"}} {self.total[m]}',
                      f'nv_inference_first_response_histogram_ms_sum{{model="{m}",version="1"}} {self.total_ms[m]}']
            lines += [f'nv_inference_first_response_histogram_ms_bucket{{model="{m}",version="1",le="{b}"}} {c}'
                      for b, c in zip(buckets, counts)]
            lines.append(f'nv_inference_first_response_histogram_ms_bucket{{model="{m}",version="1",le="+Inf"}} {self.total[m]}')
        return ("\n".join(lines) + "\n").encode()


class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


def main():
    global MODEL, NO_TTFT
    a = argparse.ArgumentParser()
    a.add_argument("--engine", required=True)
    a.add_argument("--mode", default="steady")
    a.add_argument("--observe", nargs="*", default=[])
    a.add_argument("--lifetime", type=float, default=120)
    a.add_argument("--model", default=MODEL)
    a.add_argument("--port", type=int, default=0)
    a.add_argument("--outcomes", nargs="*", default=[])
    a.add_argument("--delay", type=float, default=0)
    a.add_argument("--reads")
    a.add_argument("--no-ttft", action="store_true")
    a.add_argument("--history", nargs="*", default=[])
    a.add_argument("--hostile", type=int, default=0)
    a.add_argument("--long", type=int, default=0)
    a.add_argument("--triton-models", nargs="*", default=[])
    args = a.parse_args()
    MODEL, NO_TTFT = args.model, args.no_ttft
    HOSTILE.extend(f"{i:02}hostile\x00\x1b[31m\x7f\r" + "x" * 10240 for i in range(args.hostile))
    # Served: 128 bytes, the longest name the exporter keeps; the model's
    # name in it, so that two doubles' are two models.
    HOSTILE.extend(f"{i:02}-{MODEL}-".ljust(128, "l") for i in range(args.long))
    obs = [tuple(int(x) for x in o.split(":")) for o in args.observe]
    outcomes = [(o.split(":")[0], int(o.split(":")[1])) for o in args.outcomes]
    triton = None
    if args.engine == "triton":
        models = [(m.split("=")[0], [int(b) for b in m.split("=")[1].split(",")] if "=" in m
                   else TRITON_TTFT_MS) for m in args.triton_models or [MODEL]]
        triton = Triton(models, obs, outcomes)
        body, children, count = triton.body, [], None
    else:
        body, children, count = registry(args.engine, obs)
    if children:
        observe(children, [tuple(int(x) for x in o.split(":")) for o in args.history])
    lock = threading.Lock()

    def tick():
        with lock:
            if triton:
                triton.tick()
            observe(children, obs)
            for reason, n in outcomes if count else []:
                count(reason, n)
    tick_outcomes = lambda: [count(r, n) for r, n in outcomes] if count else None
    with lock:
        tick_outcomes()
    if args.mode == "grow":
        def flow():
            while True:
                time.sleep(0.1)
                tick()
        threading.Thread(target=flow, daemon=True).start()

    def app(environ, start):
        if args.reads:
            with open(args.reads, "a") as f:
                f.write("read\n")
        time.sleep(args.delay)
        if args.mode == "hang":
            time.sleep(args.lifetime)
        if args.mode == "garbage":
            start("200 OK", [("Content-Type", "text/plain")])
            return [b"\x00\xff{not: prometheus}\n" * 100]
        if args.mode == "huge":
            # 50 MB of valid text, no Content-Length: read until close.
            start("200 OK", [("Content-Type", "text/plain; version=0.0.4")])
            line = b"vllm:padding_total{model_name=\"m\"} 1\n"
            return (line * 26000 for _ in range(50))
        start("200 OK", [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")])
        with lock:
            return [body()]

    server = make_server("127.0.0.1", args.port, app, handler_class=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"PORT {server.server_port}", flush=True)
    time.sleep(args.lifetime)


if __name__ == "__main__":
    main()

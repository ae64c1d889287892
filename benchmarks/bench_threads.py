"""stdops at 1 and 2 threads on one zoo network, with the helper's hand-off latency (not part of `make bench`).

    python benchmarks/bench_threads.py zoo/mobilenet_v2/model.param [--mode alt|block] [--rounds 300]

Why: issue 13's 2-thread column. ``--mode alt`` alternates the thread counts call by call (as bench_zoo.py's
last phase), ``--mode block`` runs blocks of 60 calls at each count, to tell a cost of switching counts from a
cost of the second thread itself. The hand-off latency is the time from the caller's queueing of a part
(ops/_blas.run_parts) to a helper thread starting it; parts the caller ran itself are not counted. Wall time.
"""

from __future__ import annotations

import argparse
import os
import threading
import time

import numpy as np
from threadpoolctl import ThreadpoolController

import stdops.ncnn
import stdops.onnx
from stdops.ops import _blas
from stdops.perf import tune_allocator


class _TimedQueue:
    """Stands in for _blas's part queue: wraps each part so that a helper records when it started it."""

    def __init__(self, inner, latencies: list[float], caller: threading.Thread):
        self.inner, self.latencies, self.caller, self.queued = inner, latencies, caller, 0

    def get(self):
        return self.inner.get()

    def get_nowait(self):
        return self.inner.get_nowait()

    def put(self, part) -> None:
        t_put, fn = time.perf_counter(), part.fn
        self.queued += 1

        def timed():
            if threading.current_thread() is not self.caller:
                self.latencies.append(time.perf_counter() - t_put)
            fn()

        part.fn = timed
        self.inner.put(part)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", help="a zoo network's model.onnx or model.param (its in0.npy beside it)")
    ap.add_argument("--mode", choices=("alt", "block"), default="alt")
    ap.add_argument("--rounds", type=int, default=300, help="calls at each thread count")
    args = ap.parse_args()
    tune_allocator()
    folder = os.path.dirname(args.model)
    x = np.load(os.path.join(folder, "in0.npy"))
    if args.model.endswith(".onnx"):
        net = stdops.onnx.load(args.model)
        feeds = {net.input_names[0]: x}
    else:
        net = stdops.ncnn.Net.load(args.model, os.path.join(folder, "model.bin"))
        feeds = {"in0": x[0]}  # ncnn blobs have no batch axis (as bench_zoo.py)
    ctl = ThreadpoolController().select(user_api="blas")
    latencies: list[float] = []
    queue = _TimedQueue(_blas._queue, latencies, threading.current_thread())
    _blas._queue = queue  # type: ignore[assignment]

    def call(threads: int) -> float:
        ctl.limit(limits=threads)
        t0 = time.perf_counter()
        net.run(feeds)
        return time.perf_counter() - t0

    for _ in range(3):
        call(1), call(2)
    latencies.clear()
    queue.queued = 0
    times: dict[int, list[float]] = {1: [], 2: []}
    if args.mode == "alt":
        for _ in range(args.rounds):
            for t in (1, 2):
                times[t].append(call(t))
    else:
        for _ in range(max(1, args.rounds // 60)):
            for t in (1, 2):
                times[t] += [call(t) for _ in range(60)]
    one, two = (np.array(times[t]) * 1e3 for t in (1, 2))
    lat = np.array(latencies) * 1e6 if latencies else np.zeros(1)
    n = len(two)
    print(
        f"{args.mode}: min {one.min():.3f} / {two.min():.3f} ms (2/1 {two.min() / one.min():.3f}), "
        f"median {np.median(one):.3f} / {np.median(two):.3f} ms (2/1 {np.median(two) / np.median(one):.3f}); "
        f"parts queued a run {queue.queued / n:.1f}, started by a helper {len(latencies) / n:.1f}, "
        f"hand-off median {np.median(lat):.1f} us, p90 {np.percentile(lat, 90):.1f} us"
    )


if __name__ == "__main__":
    main()

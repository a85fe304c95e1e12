"""How a call is timed (worker side).

CUDA: each repetition is bracketed by its own pair of CUDA events after a
warm-up, and the median is reported (with min and max), so one preempted
launch cannot move the result. The L2 cache (50 MB on an H200) would hold a
small problem's inputs between repetitions and flatter bandwidth-bound
kernels, hence the `l2` modes:

- rotate (default): cycle through enough independent input sets that their
  total size is at least twice the L2; prefill inputs of the default grid
  are 64 MB per tensor, so this matters mostly for decoding;
- flush: write a buffer of twice the L2 size before every repetition,
  outside the event pair (cold L2 for every call);
- warm: reuse one input set (hot L2; the optimistic number).

Decoding kernels take microseconds, less than Python needs to launch them,
so they are timed as CUDA graphs: a graph of `calls_per_graph` calls (cycling
through the input sets) is replayed and its time divided by the calls.

CPU: time.perf_counter around each call, median after warm-up.
"""

import math
import statistics
import time

GRAPH_CALLS = 20
MAX_ROTATIONS = 16
DEFAULT_L2_BYTES = 50 << 20


def summarize(ms):
    return {"ms": statistics.median(ms), "ms_min": min(ms), "ms_max": max(ms), "reps": len(ms)}


def rotations(set_bytes, l2_bytes, mode):
    """How many input sets the rotate mode needs."""
    if mode != "rotate" or set_bytes <= 0:
        return 1
    return max(1, min(MAX_ROTATIONS, math.ceil(2 * l2_bytes / set_bytes)))


class Timer:
    def __init__(self, torch, device, l2_mode):
        self.torch = torch
        self.cuda = device.startswith("cuda")
        self.l2_mode = l2_mode
        self.l2_bytes = DEFAULT_L2_BYTES
        self.flush_buffer = None
        if self.cuda:
            props = torch.cuda.get_device_properties(torch.device(device))
            self.l2_bytes = int(getattr(props, "L2_cache_size", 0) or DEFAULT_L2_BYTES)
            if l2_mode == "flush":
                self.flush_buffer = torch.empty(2 * self.l2_bytes, dtype=torch.uint8, device=device)

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def eager(self, calls, warmup, reps):
        """Median time of calls[i % len(calls)]() over `reps` repetitions."""
        for i in range(warmup):
            calls[i % len(calls)]()
        self.sync()
        if not self.cuda:
            ms = []
            for i in range(reps):
                t0 = time.perf_counter()
                calls[i % len(calls)]()
                ms.append((time.perf_counter() - t0) * 1e3)
            return summarize(ms)
        torch = self.torch
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            if self.flush_buffer is not None:
                self.flush_buffer.zero_()
            starts[i].record()
            calls[i % len(calls)]()
            ends[i].record()
        torch.cuda.synchronize()
        return summarize([s.elapsed_time(e) for s, e in zip(starts, ends)])

    def graph(self, calls, warmup, reps, calls_per_graph=GRAPH_CALLS):
        """Median per-call time of a captured graph of `calls_per_graph`
        calls. Raises whatever capture raises; the caller falls back to
        eager()."""
        torch = self.torch
        per_graph = max(calls_per_graph, len(calls))
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # lazy initialization must not happen during capture
            for c in calls:
                c()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(per_graph):
                calls[i % len(calls)]()
        for _ in range(warmup):
            graph.replay()
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            starts[i].record()
            graph.replay()
            ends[i].record()
        torch.cuda.synchronize()
        result = summarize([s.elapsed_time(e) / per_graph for s, e in zip(starts, ends)])
        result["graph_calls"] = per_graph
        del graph
        return result

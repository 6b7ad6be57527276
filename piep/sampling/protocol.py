"""The lab's measurement protocol, one copy for every sampler: warm up on a side stream,
capture a CUDA graph, time with CUDA events (the host clock on a CPU device, for tests);
energy windows are the meter's (`RankMeter.window`, `EnergyMeter.measure`).

    graph = capture(lambda: step(), warm=lambda: [step() for _ in range(3)])
    per_call = seconds(lambda i: graph.replay(), 3)
"""

from __future__ import annotations

from typing import Callable

import torch

from piep.device import clock


def capture(body: Callable[[], object], *, warm: Callable[[], object] | None = None,
            then: Callable[[], object] | None = None) -> "torch.cuda.CUDAGraph":
    """`body` captured in a CUDA graph. First `warm` (default: `body` once) runs on a side
    stream, so that lazy allocations and library handles exist before the capture; `then`
    runs between warm-up and capture (restore state the warm-up changed, a barrier)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        (warm or body)()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    if then is not None:
        then()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    return graph


def seconds(fn: Callable[[int], object], calls: int, *, cuda: bool = True) -> float:
    """Seconds per call of fn(0) .. fn(calls - 1) run back to back: CUDA events around
    them on a GPU (what the GPU took, not the launches), the host clock otherwise."""
    if not cuda:
        t0 = clock.now()
        for i in range(calls):
            fn(i)
        return (clock.now() - t0) / calls
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(calls):
        fn(i)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1000 / calls

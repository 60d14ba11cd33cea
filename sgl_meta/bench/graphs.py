"""CUDA-graph capture of one step's metadata refresh calls."""

from __future__ import annotations

import torch


def capture(calls, pool) -> "torch.cuda.CUDAGraph":
    """Capture ``calls`` (run in order) into a new graph sharing memory ``pool``.

    The calls run twice on a side stream first, as for any capture (lazy
    initialisation must not happen inside it). Graphs of one run share a pool
    the way SGLang's bucket graphs do: they never run concurrently and keep no
    live outputs in it (every output is a caller-owned static buffer).
    """
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            for call in calls:
                call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        for call in calls:
            call()
    return graph


class EmulatedGraph:
    """Stand-in for a CUDA graph on CPU (``--emulate-graphs``): replays the
    captured calls eagerly with the same static arguments, so the graph-mode
    call path (bucket size, static scalars) is exercised without a GPU."""

    def __init__(self, calls):
        self.calls = list(calls)

    def replay(self) -> None:
        for call in self.calls:
            call()

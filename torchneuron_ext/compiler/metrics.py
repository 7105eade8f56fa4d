"""Per-graph compile metrics and a graph-break report."""
from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable, Optional

_lock = threading.Lock()
_graphs: list["GraphMetrics"] = []


@dataclasses.dataclass
class GraphMetrics:
    graph_id: int
    name: str
    nodes: int  # call_function / call_method / call_module nodes of the captured FX graph
    inputs: int
    kernels_generated: int = 0
    compile_seconds: float = 0.0
    phases_seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    cache_hits: int = 0
    cache_misses: int = 0
    calls: int = 0


def _new_graph(name: str, nodes: int, inputs: int) -> GraphMetrics:
    with _lock:
        m = GraphMetrics(graph_id=len(_graphs), name=name, nodes=nodes, inputs=inputs)
        _graphs.append(m)
        return m


def get_metrics() -> list[dict[str, Any]]:
    """One record per compiled graph: nodes, kernels generated, compile seconds and seconds per
    phase (aot_autograd, inductor_lowering, inductor_codegen, cpp_compile, inductor_total; zero
    for phases a cache hit skipped), FX-graph cache hits and misses, calls."""
    with _lock:
        return [dataclasses.asdict(m) for m in _graphs]


def reset_metrics() -> None:
    with _lock:
        _graphs.clear()


# TorchNeuron's names, served as torch.neuron.get_dynamo_metrics / reset_dynamo_metrics
# (registration.register_device_module).
def get_dynamo_metrics() -> list[dict[str, Any]]:
    """One record per graph compiled by ``torch.compile(backend="neuron")`` (TorchNeuron's torch.neuron name)."""
    return get_metrics()


def reset_dynamo_metrics() -> None:
    """Forget the compile metrics recorded so far."""
    reset_metrics()


@dataclasses.dataclass
class GraphBreakReport:
    graphs: int
    graph_breaks: int
    reasons: list[str]

    def __str__(self) -> str:
        lines = [f"{self.graphs} graph(s), {self.graph_breaks} graph break(s)"]
        lines += [f"  {i + 1}. {r}" for i, r in enumerate(self.reasons)]
        return "\n".join(lines)


def graph_breaks(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> GraphBreakReport:
    """Where and why Dynamo splits `fn` into several graphs, for these inputs."""
    import torch._dynamo

    explanation = torch._dynamo.explain(fn)(*args, **kwargs)
    reasons = []
    for b in explanation.break_reasons:
        where = ""
        if getattr(b, "user_stack", None):
            frame = b.user_stack[-1]
            where = f" ({frame.filename.rsplit('/', 1)[-1]}:{frame.lineno})"
        reasons.append(f"{b.reason}{where}")
    return GraphBreakReport(graphs=explanation.graph_count, graph_breaks=explanation.graph_break_count,
                            reasons=reasons)

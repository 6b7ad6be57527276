"""Model tree nodes. A node describes the work of ONE GPU; `ranks` GPUs run it side by
side and `count` says how many times it repeats (80 identical layers are one node x 80)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

COMPUTE_KINDS = ("embedding", "rmsnorm", "q_proj", "k_proj", "v_proj", "rope", "attention",
                 "o_proj", "gate_proj", "up_proj", "activation", "down_proj", "final_norm",
                 "lm_head", "sampling", "residual", "sdpa_masked",
                 # of families beyond Llama's (piep.core.families): fused projections, GeGLU's
                 # activation, a multiply by a scalar
                 "qkv_proj", "gate_up_proj", "geglu", "scale",
                 # eager attention's pointwise passes over the materialized scores
                 # (Gemma 2's soft-capping: scale, tanh cap, mask, softmax, cast)
                 "scores",
                 # a mixture of experts' router, routing, copies, masks and grouped GEMMs
                 "router", "routing", "moe_copy", "moe_mask", "experts_gate_up",
                 "experts_down",
                 # generate()'s decode steps: the pairs' weights gathered, a batched GEMV
                 "experts_batched",
                 # a projection of FP8 weights (row-wise scales, dynamic per-token FP8 input)
                 "fp8_linear",
                 # continuous batching's packed attention under its additive mask
                 "sdpa_paged",
                 # Llama 4's experts: one batched GEMM of equal problems, one per expert
                 "experts_bmm",
                 # gpt-oss's eager attention with sinks, its passes and GEMMs as one leaf
                 "sinks_attention",
                 # vLLM's fused MoE GEMM (Triton): each expert's rows padded to its block
                 "experts_fused")
COMM_KINDS = ("allreduce", "allgather", "p2p")
# copies of the KV cache some engines make (priced by their module samples; without
# samples, at the GPU's measured copy rate); `kv_slide`: a sliding cache's concatenation
# past its window, whose source is a strided slice (the last window - 1 keys of the
# previous step's concatenation)
COPY_KINDS = ("kv_append", "kv_expand", "kv_gather", "kv_slide")
GROUP_KINDS = ("deployment", "replica", "phase", "step", "stage", "layer", "window")


@dataclass
class Node:
    name: str
    kind: str
    phase: str | None = None
    flops: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0
    comm_bytes: float = 0.0
    group_size: int = 1       # GPUs taking part in a collective
    ranks: int | None = None  # GPUs running this node side by side (None: as parent)
    count: float = 1          # repetitions under the parent (a share of a windowed
    #                           engine's attention forms: Deployment.window_weights)
    tokens: int = 0           # tokens in flight through the node
    context_len: int = 0      # attention context (keys per query)
    launches: int = 0         # kernel launches per call
    attrs: dict[str, Any] = field(default_factory=dict)
    children: list["Node"] = field(default_factory=list)

    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def is_comm(self) -> bool:
        return self.kind in COMM_KINDS

    @property
    def bytes_moved(self) -> float:
        return self.bytes_read + self.bytes_written

    def add(self, *nodes: "Node") -> "Node":
        self.children.extend(nodes)
        return self

    def walk(self, path: str = "", mult: int = 1) -> Iterator[tuple[str, int, "Node"]]:
        """Yield (path, multiplicity per GPU, node) in pre-order; multiplicity counts
        repeats, not ranks. Iterative: predictions walk thousands of trees."""
        stack = [(path, mult, self)]
        while stack:
            parent, m, node = stack.pop()
            here = f"{parent}/{node.name}" if parent else node.name
            m = m * node.count
            yield here, m, node
            for child in reversed(node.children):
                stack.append((here, m, child))

    def leaves(self) -> Iterator[tuple[str, int, "Node"]]:
        for path, mult, node in self.walk():
            if node.is_leaf:
                yield path, mult, node

    def totals(self) -> dict[str, float]:
        """FLOPs, bytes and communicated bytes summed over repeats AND ranks (all GPUs)."""
        out = {"flops": 0.0, "bytes_moved": 0.0, "comm_bytes": 0.0}
        for _, mult, leaf in self._leaves_with_ranks():
            out["flops"] += mult * leaf.flops
            out["bytes_moved"] += mult * leaf.bytes_moved
            out["comm_bytes"] += mult * leaf.comm_bytes
        return out

    def _leaves_with_ranks(self, mult: int = 1, ranks: int = 1):
        mult *= self.count
        ranks = self.ranks if self.ranks is not None else ranks
        if self.is_leaf:
            yield None, mult * ranks, self
        for child in self.children:
            yield from child._leaves_with_ranks(mult, ranks)

    def size(self) -> int:
        return 1 + sum(c.size() for c in self.children)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind}
        for key in ("phase", "flops", "bytes_read", "bytes_written", "comm_bytes", "group_size",
                    "ranks", "count", "tokens", "context_len", "launches"):
            value = getattr(self, key)
            if value not in (None, 0, 0.0) or key in ("count",):
                out[key] = value
        if self.attrs:
            out["attrs"] = self.attrs
        if self.children:
            out["children"] = [c.to_dict() for c in self.children]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Node":
        kids = [cls.from_dict(c) for c in data.get("children", [])]
        fields = {k: v for k, v in data.items() if k != "children"}
        return cls(**fields, children=kids)

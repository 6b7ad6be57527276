"""The engine registry: every engine piep prices or measures, each in one record.

An engine is the software that runs the model. Its record says what it is, how it decodes,
the structure it adds to the model tree (how it holds and reads the KV cache), its host
path and the host terms its profile fits on end-to-end runs, its kind (a static batch or a
stream of requests) and profile, and how its runs are measured. Code elsewhere asks a
record (`engine(name)`, or the names with a property: `names(kind="stream")`); it does not
name engines.
"""

from __future__ import annotations

from dataclasses import dataclass

from piep.core.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class Engine:
    """What piep knows of one engine."""
    name: str
    description: str
    # how it decodes: "graph" (a CUDA-graph replay over a static cache) or "eager"
    decode: str
    # piep's own reference runner: priced by the predictor's own terms, no profile
    reference: bool = False
    # --- the structure it adds to the model tree (piep.tree.builder) ---
    # transformers' DynamicCache: the whole cache concatenated anew every decode step
    dynamic_cache: bool = False
    # attention reads a whole cache under a mask, K/V expanded to every query head (a
    # static cache; continuous batching's paged SDPA over an iteration's gathered keys)
    masked_cache: bool = False
    # the prefill is masked too (continuous batching packs prompts and cached keys);
    # hf-static's prefill into an empty static cache runs causal SDPA over the prompt with
    # native GQA (transformers drops the mask; measured: with the masked form its runs'
    # prefill energy was over-predicted by up to 24 %)
    masked_prefill: bool = False
    # a paged cache gathered into one tensor per layer, read with a packed float mask of
    # queries x keys (continuous batching with paged SDPA)
    paged_cache: bool = False
    # a model's sliding window applied as transformers applies it (transformers >= 4.56:
    # DynamicSlidingWindowLayer, StaticSlidingWindowLayer, masking_utils): the cache keeps
    # the last `window` keys, and once a call's keys reach the window the causal mask can
    # no longer be dropped, so SDPA runs masked with K/V expanded to every query head.
    # piep's runner attends the whole context; hf-cb's paged cache keeps every key.
    applies_window: bool = False
    # the decode step is compiled (torch.compile): each chain of pointwise ops (a norm,
    # rope, a residual add, the activation) becomes one fused kernel (a kernel census of
    # hf-static's step times ~10 us a layer of such kernels against 52-75 us of eager's)
    compiled_decode: bool = False
    # a mixture of experts' experts: "grouped_mm" (transformers: the rows sorted by expert,
    # torch's grouped GEMMs over whole 2-tile blocks of rows, the rows past the routed ones
    # masked before and after each) or "fused_moe" (vLLM's and SGLang's Triton kernel:
    # each expert's rows padded to its BLOCK_SIZE_M, the gathers and the routing weights
    # inside its two GEMMs, one sum over the top-k after)
    moe_kernel: str = "grouped_mm"
    # attention: "sdpa" (torch's SDPA; gpt-oss's sinks run transformers' eager attention
    # around it) or "flash" (vLLM's FlashAttention: sinks and windows inside one kernel)
    attention_kernel: str = "sdpa"
    # --- its profile (piep.predict.engines) ---
    # the host terms fitted on its runs (the rest stay the reference runner's)
    fitted_terms: tuple[str, ...] = ()
    # how its host path works, set before its terms are fitted (piep.predict.host)
    host_form: tuple[tuple[str, object], ...] = ()
    # its profile refits the combiner on its own runs (its kernels' energy in situ differs
    # from the reference runner's: a compiled step's fused kernels, eager kernels between
    # host gaps; leave-one-model-out on the shipped runs, reports/engines.md's ablations)
    refit_combiner: bool = False
    # each run's host time scales with its launch probe over the profile's reference host
    # (`--host-probe-us` predicts for another host)
    host_fitted: bool = False
    # an engine of a user's own (vLLM, SGLang: `piep train --engine NAME --like BASE`)
    # may be priced as this one: a fit recipe and a structure it can share
    like_base: bool = False
    # --- how it is priced and fitted (chosen once: piep.api.PRICERS, piep.fit.train) ---
    # "batch": a static batch, priced by its tree; "stream": requests as they come, priced
    # by simulating its scheduler (`piep serve`; a batch is its requests arriving at once)
    kind: str = "batch"
    # what prices it over the reference runner: "engine" (host terms and kernel scales
    # fitted on its runs: piep.predict.engines), "steady" (a profile of whole runs held at
    # a concurrency, over the reference runner's tree: piep.predict.steady); None: none
    profile: str | None = "engine"
    # transformers `generate()` as piep measures it (piep.sampling.hf)
    runs_generate: bool = False
    # the schema of the records its profile is fitted on
    record_schema: str = "piep.measurement"
    # the same software decoding with CUDA graphs, for an eager engine (None: none known)
    graph_twin: str | None = None
    # at tp > 1 runs transformers' tensor-parallel path (`tp_plan="auto"`), whose terms
    # runs of another harness fit (piep.fit.tp_path)
    tp_path: bool = False
    # how its runs are measured
    measure: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS or self.profile not in PROFILES \
                or self.moe_kernel not in MOE_KERNELS \
                or self.attention_kernel not in ATTENTION_KERNELS:
            raise ValueError(f"engine {self.name}: kind {self.kind!r} (one of {KINDS}), "
                             f"profile {self.profile!r} (one of {PROFILES}), moe_kernel "
                             f"{self.moe_kernel!r} (one of {MOE_KERNELS}), attention_kernel "
                             f"{self.attention_kernel!r} (one of {ATTENTION_KERNELS})")


KINDS = ("batch", "stream")
PROFILES = ("engine", "steady", None)
MOE_KERNELS = ("grouped_mm", "fused_moe")
ATTENTION_KERNELS = ("sdpa", "flash")


ENGINES: dict[str, Engine] = {e.name: e for e in (
    Engine(name="piep-graph", description="piep reference runner", decode="graph",
           reference=True, profile=None,
           measure="piep measure --model M ... (CUDA-graph decode over a static cache)"),
    Engine(name="piep-eager", description="piep reference runner", decode="eager",
           reference=True, profile=None, graph_twin="piep-graph", measure="piep measure --mode eager ..."),
    Engine(name="hf-eager", description="transformers generate(), eager, DynamicCache",
           decode="eager", dynamic_cache=True, applies_window=True,
           fitted_terms=("host_launch_s", "eager_decode_launch_s", "step_host_s"),
           host_form=(("queue_ahead", True),), refit_combiner=True, host_fitted=True,
           like_base=True, runs_generate=True, graph_twin="hf-static", tp_path=True,
           measure="piep measure --engine hf-eager --grid DESIGN.jsonl"),
    Engine(name="hf-static",
           description="transformers generate(), static cache, compiled decode (CUDA graphs)",
           decode="graph", masked_cache=True, applies_window=True, compiled_decode=True,
           fitted_terms=("host_launch_s", "gap_graph_s", "step_host_s", "call_host_s"),
           refit_combiner=True, host_fitted=True, like_base=True, runs_generate=True,
           tp_path=True, measure="piep measure --engine hf-static --grid DESIGN.jsonl"),
    # continuous batching: fitted on replayed request traces (piep.fit.serving): the kernel
    # time scales (attention's on top), host time, the power in host gaps
    Engine(name="hf-cb",
           description="transformers continuous batching (paged SDPA, FIFO scheduler)",
           decode="eager", masked_cache=True, masked_prefill=True, paged_cache=True,
           # (its projections, norms and MLP priced by the module models as generate()'s
           # are; its packed SDPA under a float mask and its copies of the cache, scaled)
           fitted_terms=("time_scale.kind:attention", "time_scale.kind:kv_gather",
                         "host_launch_s", "step_host_s", "request_host_s", "launch_gap_w"),
           host_fitted=True, kind="stream", record_schema="piep.serving_measurement",
           like_base=True,
           measure="piep measure --engine hf-cb --trace TRACE.jsonl"),
    # vLLM: paged KV cache in 16-token blocks, chunked prefill, CUDA graphs, recompute
    # preemption; fitted on whole benchmark runs held at a concurrency (public ones shipped)
    Engine(name="vllm",
           description="vLLM (paged KV cache, chunked prefill, CUDA graphs)",
           decode="graph", kind="stream", profile="steady", moe_kernel="fused_moe",
           attention_kernel="flash",
           record_schema="piep.steady_measurement",
           measure="piep meter --serving-result r.json --gpu GPU -- vllm bench serve "
                   "--max-concurrency N ..."),
)}
DEFAULT_ENGINE = "piep-graph"


def engine(name: str | None) -> Engine:
    """The record of a built-in engine; None: the reference runner (what a model tree of
    no engine is built for)."""
    if name is None:
        return ENGINES[DEFAULT_ENGINE]
    if name not in ENGINES:
        raise ConfigError(f"engine {name!r} is not known; engines: {', '.join(ENGINES)}")
    return ENGINES[name]


def names(**properties: object) -> tuple[str, ...]:
    """The built-in engines whose record has these values (e.g. `kind="stream"`), in
    order."""
    return tuple(e.name for e in ENGINES.values()
                 if all(getattr(e, k) == v for k, v in properties.items()))


def reference_engine(decode: str) -> str:
    """The reference runner's engine of a decode mode ("graph" or "eager")."""
    return next(e.name for e in ENGINES.values() if e.reference and e.decode == decode)

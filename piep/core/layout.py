"""A deployment = model x parallel layout x workload x GPU, validated once.

All TP/PP/DP arithmetic lives here: per-rank head counts, stage boundaries, per-replica
batch, and the itemized per-GPU memory fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from piep.core.config import (BF16_BYTES, MXFP4_BYTES, ModelSpec, Parallel, Workload,
                              divisors)
from piep.core.engines import Engine, engine as engine_record
from piep.core.errors import ConfigError, FitError
from piep.core.families import MOE_PRICED, Family, family
from piep.core.gpus import GPU

GIB = 1024 ** 3


@dataclass(frozen=True)
class Deployment:
    model: ModelSpec
    parallel: Parallel
    workload: Workload
    gpu: GPU
    notes: tuple[str, ...] = field(default=())
    # the engine when it is not piep's reference runner (whose mode is workload.mode):
    # its kernel substitutions are part of the tree (piep.tree.builder)
    engine: str | None = None
    # the host that runs the engine: its launch probe (s per `x.add_(1)`); None: the host
    # the engine's profile was calibrated on. Host time scales with it (piep.predict.host)
    host_probe_s: float | None = None

    @property
    def engine_record(self) -> Engine:
        """The registry's record of the engine (the reference runner's for None)."""
        return engine_record(self.engine)

    # --- per-rank shapes ---------------------------------------------------------------
    @property
    def heads_per_rank(self) -> int:
        return self.model.num_heads // self.attention_tp

    @property
    def attention_whole(self) -> bool:
        """Whether every rank runs the whole attention: at tp > 1 under an engine that runs
        transformers' tensor-parallel plan, for a family whose plan leaves it unsharded
        (DeepSeek-V3's), or under its expert-parallel plan (`hf_ep_plan`); no all-reduce
        follows it then."""
        plan = self.hf_tp_plan
        return self.hf_ep_plan or (plan is not None and not plan.hf_tp_attention)

    @property
    def attention_tp(self) -> int:
        """The ranks the attention's heads are split over (1 where it runs whole)."""
        return 1 if self.attention_whole else self.parallel.tp

    @property
    def hf_ep_plan(self) -> bool:
        """Whether transformers' expert-parallel plan shards this deployment: ep > 1 under
        an engine that runs its tensor-parallel path (`enable_expert_parallel`). That plan
        (the config class's `base_model_ep_plan`, in place of the tensor-parallel one)
        shards the routed experts only: attention, router, dense and shared MLPs and the
        LM head run whole on every rank, and one all-reduce sums the experts' outputs."""
        return self.parallel.ep > 1 and self.engine_record.tp_path

    @property
    def dense_tp(self) -> int:
        """The ranks the modules beside the routed experts (dense and shared MLPs, the LM
        head) are split over: tp, or 1 under transformers' expert-parallel plan."""
        return 1 if self.hf_ep_plan else self.parallel.tp

    @property
    def kv_heads_per_rank(self) -> int:
        """KV heads held by one TP rank; replicated when tp > kv heads."""
        return max(1, self.model.num_kv_heads // self.attention_tp)

    @property
    def ffn_per_rank(self) -> int:
        return self.model.intermediate_size // self.dense_tp

    @property
    def expert_ffn_per_rank(self) -> int:
        """A routed expert's MLP width on one TP rank (transformers' plan shards each
        expert's gate/up by columns and down by rows, as a dense MLP's); whole where the
        experts are sharded over the ranks instead (ep > 1)."""
        return self.model.ffn_of_experts if self.experts_whole \
            else max(1, self.model.ffn_of_experts // self.parallel.tp)

    @property
    def dequantized(self) -> bool:
        """Whether MXFP4 experts (`ModelSpec.mxfp4_experts`) run dequantized to bf16: under
        transformers (without `kernels`); vLLM's fused MoE (Mxfp4MoEMethod) reads them as
        stored, 4.25 bits a weight (its scales: one byte per 32)."""
        return self.model.mxfp4_experts and self.engine_record.moe_kernel != "fused_moe"

    @property
    def expert_weight_bytes(self) -> float:
        """Bytes a routed expert's weight is read and held at: the layers' (an FP8
        checkpoint's byte, else bf16's two), or MXFP4's 4.25 bits where the engine keeps
        them so."""
        return MXFP4_BYTES if self.model.mxfp4_experts and not self.dequantized \
            else self.model.weight_bytes

    @property
    def dtypes(self) -> dict[str, str]:
        """What an answer prices the weights and KV cache in, as this engine loads them."""
        return self.model.dtypes_as(dequantized=self.dequantized)

    def stage_expert_weights(self) -> float:
        """The routed experts' weights among `stage_weights` (elements)."""
        m = self.model
        if not m.is_moe:
            return 0.0
        return sum(n * m.routed_expert_params(self.parallel.tp, self.expert_shares)
                   for (_, _, sparse), n in m.layer_kinds(range(self.stage_layers()[0]))
                   if sparse)

    @property
    def expert_shares(self) -> int | None:
        """The shares the routed experts are dealt in, each rank holding one whole: ep where
        they are sharded, 1 where tp leaves every expert whole on every rank, None where
        each is split by width."""
        ep = self.parallel.ep
        return ep if ep > 1 else 1 if self.experts_whole else None

    @property
    def every_expert(self) -> bool:
        """Whether every expert runs every token (`every_expert`)."""
        return every_expert(self.model, self.engine_record)

    @property
    def experts_whole(self) -> bool:
        """Whether a rank holds its routed experts at full width: sharded over the ranks
        (ep > 1), or left whole on every rank by transformers' tensor-parallel plan of the
        family (Qwen2-MoE's) under an engine that runs it."""
        plan = self.hf_tp_plan
        return self.parallel.ep > 1 or (plan is not None and not plan.hf_tp_experts)

    @property
    def hf_tp_plan(self) -> Family | None:
        """The family whose transformers tensor-parallel plan shards this deployment (its
        `Family` row's `hf_tp_*` fields): at tp > 1 under an engine that runs the plan;
        None otherwise (the reference runner and vLLM shard as Megatron does)."""
        return _hf_tp_plan(self.model, self.parallel.tp, self.engine_record)

    @property
    def vocab_per_rank(self) -> int:
        return -(-self.model.vocab_size // self.dense_tp)

    @property
    def replica_batch(self) -> int:
        return self.workload.batch // self.parallel.dp

    def stage_layers(self) -> list[int]:
        per = self.model.num_layers // self.parallel.pp
        return [per] * self.parallel.pp

    @property
    def num_gpus(self) -> int:
        return self.parallel.world_size

    def describe(self) -> str:
        p = self.parallel
        return (f"{self.model.name} tp={p.tp} pp={p.pp} dp={p.dp} batch={self.workload.batch} "
                f"prompt={self.workload.prompt_len} gen={self.workload.gen_len} "
                f"{self.workload.mode} on {p.world_size}x {self.gpu.name}")

    # --- the engine's sliding window ------------------------------------------------
    @property
    def window(self) -> int | None:
        """The sliding window the engine applies (None: every key is attended)."""
        window = self.model.sliding_window
        return window if window and self.engine_record.applies_window else None

    def full_context_steps(self, window: int | None) -> int:
        """Decode steps whose keys (prompt + step) stay under `window`: transformers drops
        their mask (native GQA); the later ones run masked over the window."""
        w = self.workload
        steps = max(w.gen_len - 1, 0)
        return steps if window is None else min(max(window - w.prompt_len - 1, 0), steps)

    @property
    def window_weights(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """Per phase (prefill, decode): the shares of (full-context, sliding-window)
        attention. A prefill of at least `window` keys runs masked; a decode step once
        prompt + step keys reach the window."""
        window, w = self.window, self.workload
        if window is None:
            return (1.0, 0.0), (1.0, 0.0)
        steps = max(w.gen_len - 1, 0)
        full = self.full_context_steps(window) / steps if steps else 1.0
        pre = 1.0 if w.prompt_len < window else 0.0
        return (pre, 1.0 - pre), (full, 1.0 - full)

    @property
    def past_window(self) -> bool:
        """Whether some of the attention runs past the engine's sliding window."""
        return any(sliding for _, sliding in self.window_weights)

    # --- memory ---------------------------------------------------------------------
    def kv_slots(self) -> int:
        """KV-cache slots of the first stage's layers, summed: a layer that slides under an
        engine that applies the window holds the window (transformers' sliding cache
        layers), every other layer the whole context."""
        m, w = self.model, self.workload
        window = m.sliding_window if self.engine_record.applies_window else None
        kinds = m.layer_kinds(range(self.stage_layers()[0]))
        return sum(n * (min(w.context_len, window) if sliding and window else w.context_len)
                   for (sliding, *_), n in kinds)

    def stage_weights(self) -> float:
        """The weights of the first stage's layers on one rank (elements): each layer's
        attention, MLP (a mixture of experts' or, on its dense layers, a dense one) and
        norms, at the tensor-parallel split."""
        m = self.model
        return sum(n * (m.attention_params(self.attention_tp)
                        + m.mlp_params(sparse, self.dense_tp, self.expert_shares)
                        + m.norm_params())
                   for (_, _, sparse), n in m.layer_kinds(range(self.stage_layers()[0])))

    def memory_items_gib(self) -> dict[str, dict[str, float]]:
        """Itemized memory per stage position (first/last stage differ), in GiB."""
        return {pos: {**dict(zip(MEMORY_ITEMS, items)), "total": sum(items)}
                for pos, items in self._memory_gib()}

    def peak_memory_gib(self) -> float:
        return max(sum(items) for _, items in self._memory_gib())

    def eager_scores_bytes(self) -> float:
        """The prefill's attention scores where an engine's eager attention materializes
        them (gpt-oss's sinks under transformers, `eager_attention_forward`): every
        query's score of every key, a head's row with its sink, two copies alive at once
        (each pass - mask, concatenation, shift, softmax - writes the next before the
        last is freed); 0 under SDPA or a flash kernel, and for a paged cache."""
        r = self.engine_record
        if not self.model.attention_sinks or r.attention_kernel == "flash" or r.paged_cache:
            return 0.0
        q = self.workload.prompt_len
        return 2 * self.replica_batch * self.heads_per_rank * q * (q + 1) * BF16_BYTES

    def gathered_experts_bytes(self) -> float:
        """The experts' weights one decode step of `generate()` copies per layer: its
        `batched_mm` path gathers the gate_up and the down matrix of every (token, expert)
        pair, both alive at once (at ep > 1 too: the other ranks' pairs are clamped to a
        local expert, not skipped); 0 where the experts run otherwise."""
        m = self.model
        if not (m.is_moe and self.engine_record.runs_generate) or self.every_expert:
            return 0.0
        pairs = self.replica_batch * m.experts_per_token
        return pairs * 3 * self.expert_ffn_per_rank * m.hidden_size * self.expert_weight_bytes

    def _memory_gib(self) -> list[tuple[str, list[float]]]:
        """Per stage position, its memory items (`MEMORY_ITEMS` order), in GiB."""
        m, w, p, g = self.model, self.workload, self.parallel, self.gpu
        h, b = m.hidden_size, self.replica_batch
        heads, kv_heads = self.heads_per_rank, self.kv_heads_per_rank
        ffn, vocab = self.ffn_per_rank, self.vocab_per_rank
        kv_cache = self.kv_slots() * b * m.kv_per_token(self.attention_tp) * BF16_BYTES
        # an FP8 checkpoint's projections: a byte per weight (norms and their row scales
        # are a rounding error next to them)
        weights_layers = self.stage_weights() * m.weight_bytes
        if self.expert_weight_bytes != m.weight_bytes:  # (MXFP4 experts kept so)
            weights_layers -= self.stage_expert_weights() * (m.weight_bytes
                                                             - self.expert_weight_bytes)
        embed = m.vocab_size * h * BF16_BYTES  # replicated over TP (row gather, no collective)
        head = 0 if m.tie_word_embeddings else vocab * h * BF16_BYTES
        tokens = b * w.prompt_len
        # prefill peak: gate, up and their product at ffn/tp, plus a few hidden-size buffers
        act = (3 * tokens * ffn + 6 * tokens * h
               + tokens * (heads + 2 * kv_heads) * m.head_dim) * BF16_BYTES
        logits = b * (vocab + m.vocab_size) * 4
        decode_act = (3 * b * ffn + 8 * b * h) * BF16_BYTES + logits
        # (a layer's attention scores and its MLP's intermediates are not alive at once,
        # nor a decode step's expert copies and the prefill's)
        act = max(act, self.eager_scores_bytes(), self.gathered_experts_bytes())
        graph_pool = g.graph_pool_factor * decode_act / GIB if w.mode == "graph" else 0.0
        fixed = [g.context_gib, g.cublas_workspace_gib,
                 g.nccl_workspace_gib if p.world_size > 1 else 0.0]
        last = (weights_layers + head + h * BF16_BYTES + (embed if p.pp == 1 else 0)) / GIB
        with_logits = [kv_cache / GIB, (act + logits) / GIB, graph_pool, *fixed]
        if p.pp == 1:
            return [("all", [last, *with_logits])]
        return [("first_stage", [(weights_layers + embed) / GIB, kv_cache / GIB, act / GIB,
                                 graph_pool, *fixed]),
                ("last_stage", [last, *with_logits])]


# a GPU's memory items, per stage position (`Deployment.memory_items_gib`)
MEMORY_ITEMS = ("weights", "kv_cache", "activations", "cuda_graph_pool", "cuda_context",
                "cublas_workspace", "nccl_workspace")


def _hf_tp_plan(model: ModelSpec, tp: int, record: Engine) -> Family | None:
    """`Deployment.hf_tp_plan` of a model, tp degree and engine record."""
    return (family(model.model_type) or Family()) if tp > 1 and record.tp_path else None


def valid_tps(model: ModelSpec, limit: int = 64) -> list[int]:
    """Tensor-parallel degrees every constraint allows: they divide the attention heads and
    the FFN width, and divide (or are a multiple of) the KV heads."""
    return [d for d in divisors(model.num_heads) if d <= limit and splits(model, d)]


def splits(model: ModelSpec, tp: int) -> bool:
    """Whether `tp` ranks split the model (`valid_tps`' constraints)."""
    kv = model.num_kv_heads
    return (model.num_heads % tp == 0 and (kv % tp == 0 or tp % kv == 0)
            and model.intermediate_size % tp == 0)


def _kv_note(model: ModelSpec, tp: int) -> str | None:
    if tp > model.num_kv_heads:
        return (f"tp={tp} > num_key_value_heads={model.num_kv_heads}: each KV head is "
                f"replicated on {tp // model.num_kv_heads} ranks")
    return None


def every_expert(model: ModelSpec, engine: Engine) -> bool:
    """Whether every expert runs every token: Llama 4 under transformers (one bmm over all
    experts, scores zero off the top k); vLLM's fused MoE kernel routes its tokens to their
    top k as any mixture's."""
    return model.dense_experts and engine.moe_kernel != "fused_moe"


def validate(model: ModelSpec, parallel: Parallel, workload: Workload, gpu: GPU,
             *, check_memory: bool = True, engine: str | None = None,
             host_probe_s: float | None = None) -> Deployment:
    """Check the layout against the model and the GPU; raise one clear error or return it."""
    tp, pp, dp = parallel.tp, parallel.pp, parallel.dp
    if model.unpriced:
        fix = "; give the unquantized model's config.json to price it in bf16" \
            if model.quantization and (not model.is_moe or model.model_type in MOE_PRICED) \
            else ""
        raise ConfigError(f"{model.name}: {model.unpriced}{fix}")
    if not splits(model, tp):
        why = (f"does not divide num_attention_heads={model.num_heads}" if model.num_heads % tp
               else f"neither divides nor is a multiple of num_key_value_heads="
                    f"{model.num_kv_heads}" if model.num_kv_heads % tp and tp % model.num_kv_heads
               else f"does not divide intermediate_size={model.intermediate_size}")
        raise ConfigError(f"tp={tp} {why}; use tp in "
                          f"{{{', '.join(map(str, valid_tps(model)))}}}")
    if parallel.ep > 1 and not model.is_moe:
        raise ConfigError(f"ep={parallel.ep}: {model.name} has no experts to shard (a dense "
                          f"model); use ep=1")
    dense = every_expert(model, engine_record(engine))
    if parallel.ep > 1 and (model.num_experts % parallel.ep or dense):
        raise ConfigError(f"ep={parallel.ep} does not split {model.name}'s "
                          f"{model.num_experts} experts into equal shares; use ep=1 or a tp "
                          f"that divides them" if not dense else
                          f"ep={parallel.ep}: {model.name} runs every expert on every token "
                          f"under {engine or 'the reference runner'} (Llama 4's bmm over all "
                          f"experts), which is not sharded by expert here; use ep=1, or an "
                          f"engine that routes them (vllm)")
    plan = _hf_tp_plan(model, tp, engine_record(engine))
    if plan is not None and parallel.ep > 1 and not plan.hf_ep_plan:
        raise ConfigError(f"{engine} at ep={parallel.ep}: transformers has no expert-parallel "
                          f"plan for {model.model_type} (its config class states none); use "
                          f"ep=1, or an engine that shards its experts (vllm)")
    if plan is not None and parallel.ep == 1 and not plan.hf_tp_plan:
        raise ConfigError(f"{engine} at tp={tp}: transformers has no tensor-parallel plan "
                          f"for {model.model_type} (its config class states none), so every "
                          f"rank would run the whole model; use tp=1, "
                          + (f"ep={tp} (its expert-parallel plan), " if model.is_moe
                             and plan.hf_ep_plan else "")
                          + "or an engine that shards it (vllm)")
    if model.num_layers % pp:
        ok = [d for d in divisors(model.num_layers) if d <= 32]
        raise ConfigError(f"pp={pp} does not split num_hidden_layers={model.num_layers} into "
                          f"equal stages; use pp in {{{', '.join(map(str, ok))}}}")
    if workload.batch % dp:
        raise ConfigError(f"batch={workload.batch} is not divisible by dp={dp}; use a batch "
                          f"that is a multiple of {dp}")
    if workload.context_len > model.max_position:
        what = f"cache_len={workload.cache_len}" if workload.cache_len else \
            f"prompt_len + gen_len = {workload.context_len}"
        raise ConfigError(f"{what} exceeds max_position_embeddings={model.max_position} of "
                          f"{model.name}")
    note = _kv_note(model, tp)
    if host_probe_s is not None and not 5e-7 <= host_probe_s <= 1e-3:
        raise ConfigError(f"host probe {host_probe_s * 1e6:g} us per launch is outside "
                          f"0.5-1000 us: give what `piep env --host-probe` prints on the "
                          f"host that runs the engine")
    dep = Deployment(model, parallel, workload, gpu, notes=(note,) if note else (),
                     engine=engine, host_probe_s=host_probe_s)
    if check_memory:
        _check_fit(dep)
    return dep


def _check_fit(dep: Deployment) -> None:
    paged = dep.engine_record.kind == "stream"
    if paged:  # a paged KV cache: requests wait for its blocks, so one at a time must fit
        dep = replace(dep, workload=replace(dep.workload, batch=dep.parallel.dp))
    need = dep.peak_memory_gib()
    have = dep.gpu.memory_gib
    if need <= have:
        return
    items = max(dep.memory_items_gib().values(), key=lambda i: i["total"])
    parts = ", ".join(f"{k} {v:.1f}" for k, v in items.items() if k != "total" and v >= 0.05)
    hint = _suggest(dep)
    why = {"generate()'s decode copies each (token, expert) pair's expert weights":
           (dep.gathered_experts_bytes(), "a serving engine runs them grouped: hf-cb, vllm"),
           "the eager attention's scores of every prompt token's every key":
           (dep.eager_scores_bytes(), "a flash kernel keeps none: vllm")}
    for what, (nbytes, other) in why.items():
        if nbytes / GIB >= max(1.0, 0.5 * items["activations"]):
            hint += f" (activations: {what}, {nbytes / GIB:.1f} GiB a layer; {other})"
    raise FitError(f"{dep.model.name} does not fit: needs {need:.1f} GiB per GPU of "
                   f"{have:.1f} ({parts} GiB{', for one request' if paged else ''}); {hint}")


def _suggest(dep: Deployment) -> str:
    p, m = dep.parallel, dep.model
    for tp in valid_tps(m):
        if tp <= p.tp:
            continue
        try:  # (a tp the engine cannot run, such as one without transformers' plan)
            trial = validate(m, Parallel(tp=tp, pp=p.pp, dp=p.dp), dep.workload, dep.gpu,
                             check_memory=False, engine=dep.engine)
        except ConfigError:
            continue
        if trial.peak_memory_gib() <= dep.gpu.memory_gib:
            return f"needs tp >= {tp}"
    if dep.workload.batch > p.dp:
        return "reduce batch, prompt or generation length, or add GPUs"
    return "add GPUs (tp or pp)"

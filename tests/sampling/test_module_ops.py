"""Every node kind of a real tree has a sampler op that runs (CPU, small shapes)."""

from dataclasses import replace

import pytest

pytestmark = pytest.mark.gloo

torch = pytest.importorskip("torch")

from piep.core.config import ModelSpec, Parallel, Workload  # noqa: E402
from piep.core.layout import validate  # noqa: E402
from piep.sampling.modules import COMPUTE_KINDS, build_op, shape_key  # noqa: E402
from piep.tree import build_tree  # noqa: E402

# a small Qwen2-like shape (q/k/v bias, GQA): every kind, at widths a CPU runs quickly
SMALL = ModelSpec(name="small-qwen2", model_type="qwen2", hidden_size=256, num_layers=2,
                  num_heads=8, num_kv_heads=2, head_dim=32, intermediate_size=512,
                  vocab_size=1024, qkv_bias=True)


def _compiled(s: dict, mode: str) -> bool:
    """The sampler compiles repeat_kv's copy in a graph-mode decode step (as hf-static
    compiles its step): seconds of inductor per shape on a CPU."""
    return s["kind"] == "kv_expand" and mode == "graph" and s["phase"] == "decode"


def _leaf_ops(h200, compiled: bool):
    """Every compute and KV-copy leaf of the reference runner's and transformers' engines'
    trees, with the shape the tree gives it, in both modes (those the sampler compiles, or
    the others)."""
    from piep.tree.nodes import COPY_KINDS
    # (a sliding window the prompt passes: the windowed forms' copies, kv_slide among them)
    windowed = replace(SMALL, sliding_window=8)
    # every family fact at once (piep.core.families): the leaves no Llama has
    family = replace(SMALL, model_type="phi3", fused_qkv=True, fused_gate_up=True,
                     activation="gelu_tanh", qk_norm="head", post_norms=True, rotary_dim=16,
                     nope_layers=(1,), scaled_embeddings=True, residual_scale=True,
                     logit_scale=True, score_cap=True, logit_cap=True)
    # a mixture of experts: its router, routing, copies and grouped GEMMs
    experts = replace(SMALL, model_type="qwen3_moe", num_experts=4, experts_per_token=2,
                      expert_ffn=64)
    # Llama 4's experts: one batched GEMM over every expert, and its shared expert
    bmm = replace(experts, model_type="llama4_text", dense_experts=True, shared_expert_ffn=64)
    # gpt-oss's eager attention with sinks, whole
    sinks = replace(experts, model_type="gpt_oss", attention_sinks=True, expert_bias=True)
    # FP8 projections (row-wise: piep.sampling.fp8); under vLLM, its fused MoE GEMM
    # (`experts_fused`: run by the sampler as torch's grouped GEMM, vLLM not being there)
    fp8 = replace(SMALL, quantization="FP8 (row-wise weights, dynamic per-token activations)")
    seen: set[tuple[str, str]] = set()
    for spec, engine in ((SMALL, None), (SMALL, "hf-eager"), (SMALL, "hf-static"),
                         (SMALL, "hf-cb"), (windowed, "hf-eager"), (windowed, "hf-static"),
                         (family, "hf-eager"), (experts, "hf-eager"), (bmm, "hf-eager"),
                         (sinks, "hf-eager"), (sinks, "hf-cb"), (fp8, "hf-eager"),
                         (experts, "vllm")):  # (hf-cb's paged sinks: passes over scores)
        dep = validate(spec, Parallel(tp=1 if engine else 2),
                       Workload(batch=2, prompt_len=16, gen_len=4), h200, engine=engine)
        for _, _, leaf in build_tree(dep).leaves():
            if leaf.kind not in COMPUTE_KINDS + COPY_KINDS:
                continue
            s = shape_key(leaf)
            if leaf.kind == "rope":  # the sampler's layout fields (module_shapes adds them)
                s.update(leaf.attrs["layout"])
            for mode in ("graph", "eager"):
                key = (repr(sorted(s.items())), mode)  # (each shape once: trees repeat them)
                if _compiled(s, mode) == compiled and key not in seen:
                    seen.add(key)
                    yield leaf, s, mode


def _runs_as_its_leaf(leaf, s: dict, mode: str) -> None:
    from piep.tree.nodes import COPY_KINDS
    op = build_op({**s, "mode": mode}, mode, "cpu", dtype=torch.float32)
    out = op.fn(0)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    assert all(torch.isfinite(o.float()).all() for o in outs)
    if leaf.kind in ("experts_gate_up", "experts_down"):  # every row through its expert
        assert out.shape == (s["tokens"], s["d_out"]) and s["experts"] >= 1
    if leaf.kind == "experts_batched":  # each pair's row through its gathered weights
        assert out.shape == (s["tokens"], s["d_out"], 1)
    if leaf.kind == "experts_bmm":  # every token's row through every expert
        assert out.shape == (s["experts"], s["tokens"], s["d_out"])
    if leaf.kind == "sinks_attention":  # (batch, q_len, heads, d), as transformers'
        assert out.shape == (s["batch"], s["q_len"], s["heads"], s["head_dim"])
    if leaf.kind == "fp8_linear":  # a projection's output, quantized on the way
        assert out.shape == (s["tokens"], s["d_out"])
    if leaf.kind == "attention":  # the in-situ output: (batch, q_len, heads*d)
        assert out.shape == (s["batch"], s["q_len"], s["heads"] * s["head_dim"])
    if leaf.kind == "sdpa_masked":  # (batch, heads, q_len, d), K/V expanded
        assert out.shape == (s["batch"], s["heads"], s["q_len"], s["head_dim"])
    if leaf.kind in COPY_KINDS:  # K and V, each as the tree's bytes say
        assert 2 * sum(o.numel() for o in outs) == leaf.bytes_written
    if leaf.kind == "rope":  # q and k rotated separately, in (b, heads, t, d)
        q, k = out
        assert q.shape[1] * q.shape[3] + k.shape[1] * k.shape[3] == s["width"]
        assert k.shape[1] * k.shape[3] == s["kv_width"]


def test_every_compute_leaf_has_a_runnable_op(h200):
    """Every compute and KV-copy leaf kind runs on CPU with the shape the tree gives it
    (the compiled copies: the slow tier)."""
    from piep.tree.nodes import COPY_KINDS
    kinds = set()
    for leaf, s, mode in _leaf_ops(h200, compiled=False):
        _runs_as_its_leaf(leaf, s, mode)
        kinds.add(leaf.kind)
    assert kinds == set(COMPUTE_KINDS + COPY_KINDS)


@pytest.mark.slow
def test_the_compiled_copies_run_as_their_leaves(h200):
    ops = list(_leaf_ops(h200, compiled=True))
    assert ops  # hf-static's decode steps have them
    for leaf, s, mode in ops:
        _runs_as_its_leaf(leaf, s, mode)


def test_engine_kernel_shapes_are_drawn_not_taken_from_runs():
    from piep.sampling.calibrate import ENGINE_KERNELS, module_shapes
    shapes = module_shapes(kinds=tuple(ENGINE_KERNELS), seed=5, per_kind=8)
    assert {s["kind"] for s in shapes} == set(ENGINE_KERNELS)
    assert sum(s["kind"] == "sdpa_masked" for s in shapes) == 16
    # by default each kind in its first mode; asked for, repeat_kv's eager copy in decode
    eager = module_shapes(kinds=("kv_expand",), modes=("eager",), seed=5, per_kind=8)
    assert len(eager) == 8 and all(s["mode"] == "eager" and s["phase"] == "decode"
                                   for s in eager)
    for s in shapes:
        assert s["mode"] == ENGINE_KERNELS[s["kind"]][0]
        assert 4 * s["batch"] * s["context_len"] * s["heads"] * s["head_dim"] <= 6e9
        if s["kind"] == "sdpa_masked":
            assert s["kv_heads"] == s["heads"] and s["context_len"] >= s["q_len"]
        if s["kind"] == "kv_expand":
            assert s["heads"] > s["kv_heads"]


def test_drawn_kv_copies_are_priced_with_the_bytes_their_ops_copy():
    """A drawn copy shape names the model's query heads, but only repeat_kv writes them: the
    leaf a sample trains on copies what the sampler's op copies."""
    from piep.sampling.calibrate import module_shapes
    from piep.tree.builder import leaf_from_shape
    from piep.tree.nodes import COPY_KINDS
    for kind in COPY_KINDS:
        s = next(x for x in module_shapes(kinds=(kind,), seed=3, per_kind=4)
                 if x["heads"] != x["kv_heads"] or kind == "kv_expand")
        s = {**s, "batch": 2, "context_len": 16, "tokens": 2}
        # eager: what a compiled graph-mode copy writes is the same (compiling it takes
        # seconds; the slow tier runs the compiled copies)
        op = build_op(s, "eager", "cpu", dtype=torch.float32)
        out = op.fn(0)
        assert 2 * sum(o.numel() for o in out) == leaf_from_shape(
            {k: v for k, v in s.items() if k != "mode"}).bytes_written, kind


def test_rotation_covers_four_l2(make_dep):
    from piep.sampling.modules import ROTATE_BYTES, _copies
    assert _copies(10 * 2 ** 20) * 10 * 2 ** 20 >= ROTATE_BYTES
    assert _copies(1e9) == 1


def test_module_shapes_drawn_from_the_models_and_layouts_asked():
    """`calibrate modules --models M --tp N`: attention of those models' heads per rank
    only (llama-2-7b: 32 heads, llama-2-13b: 40; at tp 1 and 2), the draw unchanged
    otherwise (every shipped dense model's and synthetic shape's heads)."""
    from piep.sampling.calibrate import module_shapes
    asked = module_shapes(kinds=("attention",), seed=61, per_kind=4,
                          models=("llama-2-7b", "llama-2-13b"), tps=(1, 2))
    assert {(s["heads"], s["kv_heads"]) for s in asked} <= {(32, 32), (16, 16), (40, 40),
                                                            (20, 20)}
    assert {s["phase"] for s in asked} == {"prefill", "decode"}
    every = module_shapes(kinds=("attention",), seed=61, per_kind=4)
    assert {(s["heads"], s["kv_heads"]) for s in every} - {(32, 32), (16, 16), (40, 40),
                                                           (20, 20)}


def test_the_packed_attention_is_each_requests_own_attention():
    """continuous batching's packed iteration (`sdpa_paged`): under its additive mask, each
    request's queries attend its own keys up to their positions and nothing else - the
    same as SDPA run on each request alone."""
    import torch.nn.functional as F
    from piep.sampling.modules import packed_mask
    torch.manual_seed(0)
    h, d, q_len, ctx, requests = 2, 8, 7, 19, 3
    q, k, v = (torch.randn(1, h, n, d) for n in (q_len, ctx, ctx))
    packed = F.scaled_dot_product_attention(
        q, k, v, attn_mask=packed_mask(q_len, ctx, requests, torch.float32, "cpu"))
    q_end = [q_len * (i + 1) // requests for i in range(requests)]
    k_end = [ctx * (i + 1) // requests for i in range(requests)]
    for r in range(requests):
        qs, ks = (q_end[r - 1], k_end[r - 1]) if r else (0, 0)
        own_q, own_k = q_end[r] - qs, k_end[r] - ks
        # causal with the queries as the newest keys: query i sees keys up to
        # own_k - own_q + i
        sees = torch.arange(own_k)[None, :] <= (own_k - own_q + torch.arange(own_q))[:, None]
        alone = F.scaled_dot_product_attention(q[:, :, qs:q_end[r]], k[:, :, ks:k_end[r]],
                                               v[:, :, ks:k_end[r]], attn_mask=sees)
        assert torch.allclose(packed[:, :, qs:q_end[r]], alone, atol=1e-5)


def test_packed_attention_shapes_are_drawn_run_and_train():
    from types import SimpleNamespace

    from piep.predict.module_models import is_fitted
    from piep.sampling.calibrate import PAGED_QUERIES, module_shapes
    from piep.tree.builder import leaf_from_shape
    shapes = module_shapes(kinds=("sdpa_paged",), seed=2, per_kind=8)
    assert len(shapes) == 16
    for s in shapes:
        assert s["batch"] == 1 and s["kv_heads"] == s["heads"] and s["tokens"] == s["q_len"]
        assert 1 <= s["requests"] <= s["q_len"] <= min(PAGED_QUERIES, s["context_len"])
        leaf = leaf_from_shape({k: v for k, v in s.items() if k != "mode"})
        # the mask (bf16, queries x keys) read beside Q, K and V
        assert leaf.bytes_read >= 2 * s["q_len"] * s["context_len"]
    decoding = [s for s in shapes if s["requests"] == s["q_len"]]
    assert decoding and len(decoding) < len(shapes)
    small = {**shapes[0], "heads": 2, "kv_heads": 2, "head_dim": 8, "q_len": 6,
             "tokens": 6, "requests": 2, "context_len": 20}
    out = build_op(small, "graph", "cpu", dtype=torch.float32).fn(0)
    assert out.shape == (1, 2, 6, 8) and torch.isfinite(out).all()
    sample = SimpleNamespace(repeat=0, kind="sdpa_paged", phase="prefill", shape=small)
    assert is_fitted(sample)  # hf-cb's tree prices its attention with it


def test_the_sinks_op_is_transformers_eager_attention():
    """The sampler's `sinks_attention` computes what gpt-oss's eager_attention_forward
    computes from the same tensors (the same ops in the same order)."""
    import inspect
    import types
    gpt_oss = pytest.importorskip("transformers.models.gpt_oss.modeling_gpt_oss")
    s = {"kind": "sinks_attention", "phase": "decode", "tokens": 2, "batch": 2, "heads": 8,
         "kv_heads": 2, "head_dim": 16, "q_len": 1, "context_len": 12}
    op = build_op({**s, "mode": "graph"}, "graph", "cpu", dtype=torch.float32,
                  gen=torch.Generator().manual_seed(0))
    held = inspect.getclosurevars(op.fn).nonlocals
    module = types.SimpleNamespace(num_key_value_groups=4, sinks=held["sinks"],
                                   training=False)
    want, _ = gpt_oss.eager_attention_forward(module, held["qs"][0], held["ks"][0],
                                              held["vs"][0], held["mask"], 16 ** -0.5)
    assert torch.allclose(op.fn(0), want, atol=1e-6)


def test_the_moe_kernels_of_their_own_are_drawn_from_their_models_within_the_card():
    """Llama 4's bmm and gpt-oss's eager attention are drawn from those models' trees, with
    the shape each sampler op needs; the attention's scores stay under the cap that keeps
    transformers' five live copies of them on one card."""
    from piep.sampling.calibrate import SINKS_MAX_SCORES, module_shapes
    from pathlib import Path
    moe = str(Path(__file__).resolve().parents[2] / "calibration/h200/moe/configs") + "/"
    bmm = module_shapes(seed=0, per_kind=6, kinds=("experts_bmm",), tps=(1,),
                        models=(moe + "piep-llama4-scout-20l.json",))
    assert bmm and all(s["experts"] == 16 and {s["d_in"], s["d_out"]} & {5120}
                       for s in bmm)
    sinks = module_shapes(seed=0, per_kind=40, kinds=("sinks_attention",), tps=(1,),
                          models=(moe + "gpt-oss-20b-shape.json",))
    assert {s["phase"] for s in sinks} == {"prefill", "decode"}
    assert all(s["heads"] == 64 and s["kv_heads"] == 8 and s["head_dim"] == 64 for s in sinks)
    assert max(s["batch"] * s["heads"] * s["q_len"] * s["context_len"] for s in sinks) \
        <= SINKS_MAX_SCORES

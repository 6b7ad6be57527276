"""Model tree arithmetic against numbers computed by hand from the published shapes."""

import pytest

from piep.tree import build_tree
from piep.tree.nodes import Node

pytestmark = pytest.mark.pure


def find(tree: Node, path_suffix: str):
    hits = [(p, m, n) for p, m, n in tree.walk() if p.endswith(path_suffix)]
    assert len(hits) == 1, (path_suffix, [h[0] for h in hits])
    return hits[0]


def test_llama2_7b_tp1_prefill(make_dep):
    tree = build_tree(make_dep("llama-2-7b", batch=1, prompt_len=512, gen_len=128))
    _, mult, q = find(tree, "prefill/stage0/layer/q_proj")
    assert mult == 32
    assert q.flops == 2 * 512 * 4096 * 4096
    assert q.bytes_read == (4096 * 4096 + 512 * 4096) * 2
    assert q.bytes_written == 512 * 4096 * 2
    _, _, att = find(tree, "prefill/stage0/layer/attention")
    assert att.flops == 2 * 1 * 32 * 512 * 512 * 128  # causal: half of 4*B*H*P^2*d
    _, _, gate = find(tree, "prefill/stage0/layer/gate_proj")
    assert gate.flops == 2 * 512 * 4096 * 11008
    _, _, head = find(tree, "prefill/stage0/lm_head")
    assert head.flops == 2 * 1 * 4096 * 32000  # last position only
    # no communication at tp=1
    assert not [n for _, _, n in tree.walk() if n.is_comm]


def test_llama2_7b_tp1_decode(make_dep):
    tree = build_tree(make_dep("llama-2-7b", batch=4, prompt_len=512, gen_len=128))
    _, mult, q = find(tree, "decode/step/stage0/layer/q_proj")
    assert mult == 127 * 32  # first token comes from prefill
    assert q.flops == 2 * 4 * 4096 * 4096
    _, _, att = find(tree, "decode/step/stage0/layer/attention")
    # graph mode: static cache of prompt + gen = 640 positions
    assert att.context_len == 640
    assert att.flops == 4 * 4 * 32 * 640 * 128
    assert att.bytes_read == (4 * 32 * 128 + 4 * 640 * 32 * 128 * 2) * 2


def test_eager_decode_attends_live_prefix(make_dep):
    tree = build_tree(make_dep("llama-2-7b", batch=1, prompt_len=512, gen_len=128, mode="eager"))
    _, _, att = find(tree, "decode/step/stage0/layer/attention")
    assert att.context_len == 512 + 64


def test_llama2_7b_tp2_shards_and_communication(make_dep):
    tree = build_tree(make_dep("llama-2-7b", tp=2, batch=1, prompt_len=512))
    _, mult, q = find(tree, "prefill/stage0/layer/q_proj")
    assert q.flops == 2 * 512 * 4096 * 2048
    _, _, down = find(tree, "prefill/stage0/layer/down_proj")
    assert down.flops == 2 * 512 * 5504 * 4096
    _, mult, ar = find(tree, "prefill/stage0/layer/allreduce_attn")
    assert (mult, ar.comm_bytes, ar.group_size) == (32, 512 * 4096 * 2, 2)
    _, _, ag = find(tree, "prefill/stage0/allgather_logits")
    assert ag.comm_bytes == 32000 * 2
    _, mult, ar_dec = find(tree, "decode/step/stage0/layer/allreduce_mlp")
    assert (mult, ar_dec.comm_bytes) == (127 * 32, 4096 * 2)
    # per GPU: 2 AllReduce per layer per phase-step + 1 AllGather; x2 ranks in totals
    per_gpu = 32 * 2 * 512 * 4096 * 2 + 32000 * 2 + 127 * (32 * 2 * 4096 * 2 + 32000 * 2)
    assert tree.totals()["comm_bytes"] == 2 * per_gpu


def test_llama3_70b_tp2_pp2(make_dep):
    tree = build_tree(make_dep("llama-3-70b", tp=2, pp=2, batch=4, prompt_len=256, gen_len=64))
    _, mult, q = find(tree, "prefill/stage0/layer/q_proj")
    assert mult == 40
    assert q.flops == 2 * (4 * 256) * 8192 * 4096
    _, _, k = find(tree, "prefill/stage0/layer/k_proj")
    assert k.flops == 2 * 1024 * 8192 * 512  # 8 kv heads / tp2 = 4 x 128
    _, _, send = find(tree, "prefill/stage0/send_to_stage1")
    assert send.comm_bytes == 4 * 256 * 8192 * 2 and send.group_size == 2
    _, mult, back = find(tree, "decode/step/stage1/send_tokens_to_stage0")
    assert (mult, back.comm_bytes) == (63, 4 * 8)
    _, _, head = find(tree, "decode/step/stage1/lm_head")
    assert head.flops == 2 * 4 * 8192 * 64128
    # embedding on stage 0 only, LM head on the last stage only
    assert [p for p, _, n in tree.walk() if n.kind == "embedding"] == [
        "deployment/replica/prefill/stage0/embedding",
        "deployment/replica/decode/step/stage0/embedding"]
    assert all("stage1" in p for p, _, n in tree.walk() if n.kind == "lm_head")


def test_dp_replicas_multiply_totals(make_dep):
    one = build_tree(make_dep("llama-2-7b", batch=4)).totals()
    two = build_tree(make_dep("llama-2-7b", dp=2, batch=8)).totals()
    assert two["flops"] == pytest.approx(2 * one["flops"])
    assert two["comm_bytes"] == 0  # no collective across replicas


def test_total_flops_close_to_two_flops_per_param_per_token(make_dep):
    dep = make_dep("llama-2-7b", batch=1, prompt_len=128, gen_len=2)
    tree = build_tree(dep)
    # prefill: 128 tokens through every layer; decode: 1 token; + attention and LM head
    matmul_params = dep.model.num_params() - 2 * 32000 * 4096
    approx = 2 * matmul_params * (128 + 1)
    assert tree.totals()["flops"] == pytest.approx(approx, rel=0.03)


def test_tree_is_small_and_serializes(make_dep):
    tree = build_tree(make_dep("llama-3-70b", tp=2, pp=2))
    assert tree.size() < 150  # 80 layers are one node x count
    again = Node.from_dict(tree.to_dict())
    assert again.totals() == tree.totals()


def test_leaf_shape_roundtrip(make_dep):
    from piep.tree.builder import leaf_from_shape, shape_key
    from piep.tree.nodes import COMPUTE_KINDS
    tree = build_tree(make_dep("qwen2.5-7b", tp=2, batch=3, prompt_len=100, gen_len=20))
    for _, _, leaf in tree.leaves():
        if leaf.kind in COMPUTE_KINDS:
            again = leaf_from_shape(shape_key(leaf))
            assert (again.flops, again.bytes_read, again.bytes_written) == (
                leaf.flops, leaf.bytes_read, leaf.bytes_written), leaf.kind

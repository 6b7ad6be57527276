"""The reference runner matches Hugging Face LlamaForCausalLM (fp32, CPU): at tp=1 in one
process, at tp=2 and pp=2 in two gloo processes, and on the 4- and 8-GPU layouts of the
multi-GPU design (tp4, pp4, tp2xpp2, tp2xdp2, tp8, tp4xpp2) in four and eight."""

import json
import os
import subprocess
import sys

import pytest
from _paths import TESTS  # noqa: E402

pytestmark = pytest.mark.gloo

if os.environ.get("PIEP_REQUIRE_TORCH"):
    import torch
    import transformers
else:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")

WORKER = TESTS / "_numerics_worker.py"
GEN = 6


def tiny(kind="llama", heads=4, kv_heads=2):
    common = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                  num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=96,
                  max_position_embeddings=128, rms_norm_eps=1e-6, rope_theta=10000.0,
                  tie_word_embeddings=False)
    if kind == "qwen2":
        return transformers.Qwen2Config(**common)
    return transformers.LlamaConfig(**common, attention_bias=False)


def reference(cfg, prompt, gen):
    """HF logits of each generated position (full forward, no cache) and greedy tokens."""
    torch.manual_seed(0)
    model = (transformers.Qwen2ForCausalLM if cfg.model_type == "qwen2"
             else transformers.LlamaForCausalLM)(cfg).float().eval()
    with torch.no_grad():
        for p in model.parameters():  # larger weights than the default init: a real test
            p.normal_(0, 0.2) if p.dim() > 1 else p.uniform_(0.5, 1.5)
        seq = prompt.clone()
        logits = []
        for _ in range(gen):
            out = model(seq).logits[:, -1]
            logits.append(out)
            seq = torch.cat([seq, out.argmax(-1, keepdim=True)], 1)
    return model, torch.stack(logits, 1), seq[:, prompt.shape[1]:]


def run_worker(tmp_path, cfg, model, prompt, tp, pp, mode, dp=1):
    blob = tmp_path / "in.pt"
    cfg_dict = json.loads(cfg.to_json_string())
    torch.save({"config": json.dumps(cfg_dict), "state": model.state_dict(), "prompt": prompt,
                "gen_len": GEN}, blob)
    out = tmp_path / f"out_{tp}_{pp}_{mode}"
    n = tp * pp * dp
    if n == 1:  # one process: this one
        from _numerics_worker import main
        main(str(blob), str(out), tp, pp, mode, dp)
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(n),
               "--standalone", str(WORKER)]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        proc = subprocess.run(cmd + [str(blob), str(out), str(tp), str(pp), mode, str(dp)],
                              capture_output=True, text=True, timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
    if dp == 1:
        return torch.load(f"{out}.pt")
    parts = [torch.load(f"{out}_dp{i}.pt") for i in range(dp)]
    return {k: torch.cat([p[k] for p in parts]) for k in ("logits", "tokens")}


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_single_process_matches_hf(tmp_path, kind, mode):
    cfg = tiny(kind)
    prompt = torch.randint(0, cfg.vocab_size, (2, 9), generator=torch.Generator().manual_seed(1))
    model, ref_logits, ref_tokens = reference(cfg, prompt, GEN)
    got = run_worker(tmp_path, cfg, model, prompt, 1, 1, mode)
    torch.testing.assert_close(got["logits"], ref_logits, rtol=1e-4, atol=1e-4)
    assert torch.equal(got["tokens"], ref_tokens)


@pytest.mark.slow
@pytest.mark.parametrize("tp, pp, mode", [(2, 1, "graph"), (2, 1, "eager"), (1, 2, "graph")])
def test_two_processes_match_hf(tmp_path, tp, pp, mode):
    cfg = tiny()
    prompt = torch.randint(0, cfg.vocab_size, (2, 7), generator=torch.Generator().manual_seed(2))
    model, ref_logits, ref_tokens = reference(cfg, prompt, GEN)
    got = run_worker(tmp_path, cfg, model, prompt, tp, pp, mode)
    torch.testing.assert_close(got["logits"], ref_logits, rtol=1e-4, atol=1e-4)
    assert torch.equal(got["tokens"], ref_tokens)


@pytest.mark.slow
@pytest.mark.parametrize("tp, pp, dp", [(4, 1, 1), (1, 4, 1), (2, 2, 1), (2, 1, 2), (8, 1, 1),
                                        (4, 2, 1)], ids=lambda v: str(v))
def test_four_and_eight_processes_match_hf(tmp_path, tp, pp, dp):
    """The layouts of the 4- and 8-GPU design (issue 17) before any GPU runs them."""
    cfg = tiny(heads=8, kv_heads=8 if tp == 8 else 4)
    prompt = torch.randint(0, cfg.vocab_size, (2 * dp, 7),
                           generator=torch.Generator().manual_seed(3))
    model, ref_logits, ref_tokens = reference(cfg, prompt, GEN)
    got = run_worker(tmp_path, cfg, model, prompt, tp, pp, "graph", dp)
    torch.testing.assert_close(got["logits"], ref_logits, rtol=1e-4, atol=1e-4)
    assert torch.equal(got["tokens"], ref_tokens)


def test_measure_reads_real_weights_from_safetensors(tmp_path):
    """`piep measure --weights FOLDER` runs on the weights of a local checkpoint."""
    from safetensors.torch import save_file
    cfg = tiny()
    model, _, _ = reference(cfg, torch.zeros(1, 2, dtype=torch.long), 1)
    folder = tmp_path / "ckpt"
    folder.mkdir()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()},
              str(folder / "model.safetensors"))
    (folder / "config.json").write_text(cfg.to_json_string())
    out = tmp_path / "m.jsonl"
    from piep.cli import main
    assert main(["measure", "--model", str(folder), "--weights", str(folder), "--dtype",
                 "fp32", "--batch", "1", "--prompt-len", "8", "--gen-len", "4",
                 "--min-window-s", "0.01", "--idle-s", "0.01", "--out", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert rec["model"] == "ckpt" and rec["gen_len"] == 4 and rec["energy_j"] is None

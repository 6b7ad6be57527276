"""`piep measure --engine hf-eager|hf-static` on the CPU: the generate() protocol, the
record it writes, the grid with the model kept across configurations, and transformers'
own tensor parallelism in two gloo processes. Windows of one process run in this process
on virtual host time that advances with the work done (`_virtual_clock`)."""

import contextlib
import io
import json
import os
import statistics
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gloo

if os.environ.get("PIEP_REQUIRE_TORCH"):
    import torch  # noqa: F401
    import transformers
else:
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")

TINY = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 96, "max_position_embeddings": 256, "hidden_act": "silu",
        "rms_norm_eps": 1e-5}
FLAGS = ["--device", "cpu", "--dtype", "fp32", "--min-window-s", "0.01", "--idle-s", "0.01",
         "--repeats", "2"]


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "config.json"
    path.write_text(json.dumps(TINY))
    return path


def _measure(args, virtual=True):
    """`piep measure ... --json` in this process, on a clock that advances with the work
    (`virtual`), else on wall time."""
    from _virtual_clock import WorkClock

    from piep.cli import main
    out, err = io.StringIO(), io.StringIO()
    with WorkClock().running() if virtual else contextlib.nullcontext(), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["measure", *args, *FLAGS, "--json"])
    assert code == 0, err.getvalue()[-3000:]
    return json.loads(out.getvalue())


def test_one_generate_call_is_the_measured_quantity(config):
    rec = _measure(["--model", str(config), "--engine", "hf-eager", "--batch", "3",
                    "--prompt-len", "7", "--gen-len", "5"])
    assert rec["engine"] == {"name": "hf-eager", "version": transformers.__version__}
    assert rec["generated_tokens"] == 5 and rec["mode"] == "eager"
    assert rec["prefill"]["window"] == "generate(max_new_tokens=1)"
    assert 0 < rec["prefill"]["time_s"] < rec["time_s"]
    assert rec["energy_j"] is None  # no GPU: timing only, never a made-up energy
    assert len(rec["warmup_s"]) >= 2 and set(rec["host_probe"]) == {
        "python_loop_200k_s", "launch_add_s", "tiny_decode_step_s"}
    # a tiny model's eager decode step: host time, a few hundred kernels' worth at most
    assert 0 < rec["host_probe"]["tiny_decode_step_s"] < 1.0
    # the host probed beside every window (and after the last); the record keeps the median
    assert len(rec["host_probes"]) == rec["repeats"] + 1
    launches = sorted(p["launch_add_s"] for p in rec["host_probes"])
    assert launches[0] <= rec["host_probe"]["launch_add_s"] <= launches[-1]
    assert rec["cache_layers"] == ["DynamicLayer"]  # no window: every key kept


def test_an_fp8_checkpoint_runs_its_projections_in_fp8(tmp_path):
    """An FP8 config is measured with each decoder projection an `Fp8Linear` (row-wise
    FP8 weights, inputs quantized per token: piep.sampling.fp8, what the module sampler's
    `fp8_linear` runs); the record names its quantization, and a spec read back from the
    record is FP8 again."""
    from piep.core.records import Measurement
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**TINY, "quantization_config": {"quant_method": "fbgemm_fp8"}}))
    rec = _measure(["--model", str(path), "--engine", "hf-eager", "--batch", "2",
                    "--prompt-len", "6", "--gen-len", "3"])
    assert rec["shape"]["quantization"].startswith("FP8 (fbgemm")
    assert Measurement.from_json(rec).spec.fp8_weights


def test_fp8_layers_follow_the_linears_they_replace():
    """`to_fp8` swaps every linear of the decoder's layers (7 a Llama layer), not the LM
    head; each answers within FP8's rounding of the bf16 layer it replaced."""
    import torch
    from transformers import AutoModelForCausalLM

    from piep.core.config import ModelSpec
    from piep.core.errors import ConfigError
    from piep.sampling.fp8 import Fp8Linear, to_fp8
    from piep.sampling.hf import _hf_config
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(_hf_config(ModelSpec.from_hf_config(
        TINY, name="tiny")))
    q = model.model.layers[0].self_attn.q_proj
    x = torch.randn(5, 64)
    with torch.no_grad():
        want = q(x)
        assert to_fp8(model) == 2 * 7
        got = model.model.layers[0].self_attn.q_proj(x)
    assert isinstance(model.model.layers[0].self_attn.q_proj, Fp8Linear)
    assert type(model.lm_head) is torch.nn.Linear
    assert torch.allclose(got, want, atol=0.08 * float(want.abs().max()))
    odd = AutoModelForCausalLM.from_config(_hf_config(ModelSpec.from_hf_config(
        {**TINY, "intermediate_size": 120}, name="odd")))
    with pytest.raises(ConfigError, match=r"multiples of 16: gate_proj \(120 x 64\)"):
        to_fp8(odd)


def test_the_record_names_a_sliding_window_cache(tmp_path):
    """A Mistral-type model with a sliding window: transformers' DynamicCache keeps the
    window (what piep's tree prices for hf-eager past the window)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**TINY, "model_type": "mistral", "sliding_window": 8}))
    rec = _measure(["--model", str(path), "--engine", "hf-eager", "--batch", "2",
                    "--prompt-len", "12", "--gen-len", "4"])
    assert rec["cache_layers"] == ["DynamicSlidingWindowLayer"]


def test_grid_keeps_the_model_and_records_the_static_cache(config, tmp_path):
    rows = [{"model": "tiny", "engine": "hf-static", "tp": 1, "pp": 1, "dp": 1, "batch": b,
             "prompt_len": p, "gen_len": g, "mode": "graph", "estimated_s": 1, "config": TINY}
            for b, p, g in ((2, 20, 6), (1, 8, 4))]
    design = tmp_path / "design.jsonl"
    design.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    from piep.cli import main
    # on wall time: what is asserted does not depend on it (dynamo compiles the decode step,
    # and is left to trace torch calls without a counting mode around them)
    assert main(["measure", "--engine", "hf-static", "--grid", str(design), "--out", str(out),
                 *FLAGS]) == 0
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["key"].split("|")[-1] for r in recs] == ["hf-static", "hf-static"]
    # the second call reuses the first call's (larger) cache on the same model object
    assert recs[0]["static_cache_len"] == recs[1]["static_cache_len"] >= 25


@pytest.mark.slow
def test_transformers_tensor_parallel_in_two_gloo_processes(config, tmp_path):
    pytest.importorskip("accelerate")
    env = {**os.environ, "PIEP_CHECKPOINTS": str(tmp_path / "ckpt")}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
                           "2", "-m", "piep", "measure", "--model", str(config), "--engine",
                           "hf-eager", "--tp", "2", "--batch", "2", "--prompt-len", "6",
                           "--gen-len", "3", *FLAGS, "--json"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rec = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert rec["tp"] == 2 and rec["gpus"] == 2 and len(rec["per_gpu"]) == 2
    assert rec["generated_tokens"] == 3


@pytest.mark.slow
def test_continuous_batching_replays_a_trace(config, tmp_path):
    """`--engine hf-cb --trace`: every request generates exactly its tokens (EOS off),
    token timestamps give TTFT/TPOT, the manager's decisions are recorded."""
    rows = [{"id": f"r{i}", "arrival_s": 0.02 * i, "prompt_len": 6 + i, "gen_len": 2 + i % 3}
            for i in range(5)]
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # on wall time: transformers stamps the tokens on it (what is asserted holds at any speed)
    rec = _measure(["--model", str(config), "--engine", "hf-cb", "--trace", str(trace)],
                   virtual=False)
    assert rec["schema"] == "piep.serving_measurement" and rec["engine"]["name"] == "hf-cb"
    got = {r["id"]: r for r in rec["per_request"]}
    assert [got[r["id"]]["generated"] for r in rows] == [r["gen_len"] for r in rows]
    assert all(got[r["id"]]["ttft_s"] > 0 for r in rows)
    assert rec["cb_config"]["max_batch_tokens"] and rec["requests"] == 5
    assert rec["time_s"] >= rows[-1]["arrival_s"]
    # every iteration of the window: the prompts' tokens once, one token per decode step
    it = rec["iterations"]
    assert sum(it["q_tokens"]) == sum(r["prompt_len"] + r["gen_len"] - 1 for r in rows)
    assert sum(it["decode_requests"]) == sum(r["gen_len"] - 1 for r in rows)
    assert all(0 <= a < b for a, b in zip(it["t_start_s"], it["t_end_s"]))
    assert it["kv_tokens"][0] == 0 and min(it["kv_tokens"]) >= 0  # cached keys, before it
    # the host probed as often before and after the replay, the record's probe their median
    from piep.sampling.hf_cb import PROBES_EACH_SIDE
    probes = [p["launch_add_s"] for p in rec["host_probes"]]
    assert len(probes) == 2 * PROBES_EACH_SIDE
    assert rec["host_probe"]["launch_add_s"] == pytest.approx(statistics.median(probes))
    # the board as generate()'s runs record it (its probe only where a meter reads it)
    assert [g["rank"] for g in rec["per_gpu"]] == [0]
    assert rec["per_gpu"][0]["idle_power_w"] == rec["idle_power_w"]


def test_kernel_census_splits_per_layer_from_outside():
    from collections import Counter

    from piep.core.config import ModelSpec, Workload
    from piep.sampling.census import census, split_counts
    per_layer, outside = split_counts({2: Counter(a=7, b=3), 4: Counter(a=11, b=3, c=2)})
    assert per_layer == Counter(a=2.0, c=1.0) and outside == Counter(a=3.0, b=3.0)
    spec = ModelSpec.from_hf_config(TINY, name="tiny")
    rec = census(spec, "hf-eager", Workload(batch=2, prompt_len=8, gen_len=4), "cpu")
    step = rec["decode_step"]["per_layer_by_name"]
    # one SDPA per layer; DynamicCache concatenates K and V, rotate_half q and k
    assert step["aten::scaled_dot_product_attention"] == 1
    assert step["aten::cat"] == 4
    assert rec["unit"] == "aten_op" and rec["decode_step"]["outside"] > 0
    # the time the operators ran is split too (its sign on a loaded CPU is noise)
    assert "aten::scaled_dot_product_attention" in rec["decode_step"]["per_layer_us_by_name"]


def test_kernel_census_splits_kernel_time_per_step_per_layer_and_outside(monkeypatch):
    """Durations go through the same split as counts: per decode step (whole call minus
    the prefill call, over G - 1 steps), per layer (4 layers minus 2, over 2), outside."""
    from collections import Counter

    from piep.core.config import ModelSpec, Workload
    from piep.sampling import census as cz

    def calls(spec, engine, workload, device, seed):
        n = spec.num_layers  # a kernel of 10 us per layer per step, 7 us outside per step
        prefill = (Counter(gemm=n, head=1), Counter(gemm=100.0 * n, head=50.0))
        steps = workload.gen_len - 1
        whole = (Counter(gemm=n * (1 + steps), head=1 + steps),
                 Counter(gemm=100.0 * n + 10.0 * n * steps, head=50.0 + 7.0 * steps))
        return prefill, whole
    monkeypatch.setattr(cz, "_calls", calls)
    spec = ModelSpec.from_hf_config(TINY, name="tiny")
    step = cz.census(spec, "hf-eager", Workload(batch=2, prompt_len=8, gen_len=5),
                     "cpu")["decode_step"]
    assert step["per_layer_us_by_name"] == {"gemm": pytest.approx(10.0)}
    assert step["outside_us_by_name"] == {"head": pytest.approx(7.0)}
    assert step["per_layer_us"] == pytest.approx(10.0) and step["outside_us"] == \
        pytest.approx(7.0)


def test_kernel_census_refuses_bad_input_in_one_line_writing_nothing(tmp_path, capsys):
    from piep.sampling.census import main
    out = tmp_path / "census.jsonl"
    for argv in (["--models", "no-such-model"], ["--models", "llama-3-8b", "--gen-len", "1"]):
        assert main([*argv, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("census: error:") and "\n" not in err
    assert not out.exists()


def test_a_mixture_of_experts_is_measured_as_transformers_runs_it(tmp_path):
    """The MoE design's path (calibration/h200/moe): transformers builds the experts from
    the config piep reads and generate() runs them; the record names the model's shape,
    experts included."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**TINY, "model_type": "qwen3_moe", "num_experts": 4,
                                "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                                "head_dim": 16}))
    rec = _measure(["--model", str(path), "--engine", "hf-eager", "--batch", "2",
                    "--prompt-len", "6", "--gen-len", "3"])
    assert rec["generated_tokens"] == 3 and rec["shape"]["model_type"] == "qwen3_moe"
    assert rec["shape"]["experts"] == {"count": 4, "per_token": 2, "ffn": 32, "shared_ffn": 0}

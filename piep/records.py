"""What a measurement record says, read one way everywhere: the model shape it ran, its
deployment, the host and board it ran on (their probes), the static cache it kept. Records
are what the lab writes (piep.sampling, piep.meter) and the fits read (piep.fit)."""

from __future__ import annotations

from typing import Any

from piep.config import ModelSpec, Parallel, Workload
from piep.engines import engine as engine_record
from piep.gpus import GPU
from piep.layout import Deployment, validate


def spec_of_record(rec: dict[str, Any]) -> ModelSpec:
    s = rec["shape"]
    return ModelSpec(name=rec["model"], model_type="llama", hidden_size=s["hidden"],
                     num_layers=s["layers"], num_heads=s["heads"], num_kv_heads=s["kv_heads"],
                     head_dim=s["head_dim"], intermediate_size=s["ffn"], vocab_size=s["vocab"],
                     qkv_bias=bool(s.get("qkv_bias")), sliding_window=s.get("sliding_window"),
                     max_position=1 << 20)


def deployment_of(rec: dict[str, Any], gpu: GPU, engine: str | None = None,
                  on_its_host: bool = False) -> Deployment:
    """The deployment a measurement record ran (the reference runner's, or `engine`'s:
    its decode mode, whatever the record says); `on_its_host`: with the record's host
    probe."""
    return validate(spec_of_record(rec), Parallel(tp=rec["tp"], pp=rec["pp"], dp=rec["dp"]),
                    Workload(batch=rec["batch"], prompt_len=rec["prompt_len"],
                             gen_len=rec["gen_len"],
                             mode=engine_record(engine).decode if engine else rec["mode"],
                             cache_len=cache_len_of(rec)), gpu,
                    check_memory=False, engine=engine,
                    host_probe_s=host_probe_of(rec) if on_its_host else None)


HOST_PROBE = "launch_add_s"  # the probe host time scales with (time per tiny launch)


def host_probe_of(rec: dict[str, Any]) -> float | None:
    """A record's host probe (s per launch), if it carries one."""
    return (rec.get("host_probe") or {}).get(HOST_PROBE)


BOARD_PROBE = "decode_gemm_power_w"  # a board's probe: a decode-like GEMM's power


def board_probe_of(rec: dict[str, Any]) -> float | None:
    """A record's board probe (W; the mean over its GPUs), if every GPU of it carries one."""
    probes = [(g.get("gpu_probe") or {}).get(BOARD_PROBE) for g in rec.get("per_gpu") or []]
    return sum(probes) / len(probes) if probes and None not in probes else None


def cache_len_of(rec: dict[str, Any]) -> int | None:
    """A static cache larger than the run's prompt + gen (kept from an earlier call)."""
    n = rec.get("static_cache_len")
    # transformers sizes the cache at prompt + gen - 1 slots (the last token is never
    # written back); piep's cache holds prompt + gen
    return n + 1 if n and n + 1 > rec["prompt_len"] + rec["gen_len"] else None

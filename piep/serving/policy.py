"""User-calibrated serving policies: another engine's scheduler and host time (`--policy`).

A policy file (JSON) replaces some of the hf-cb profile's scheduler settings and host
terms, for an engine piep has not measured (vLLM, a tuned transformers configuration):

    {"name": "vllm 0.x, my calibration",
     "block_size": 16, "kv_memory_share": 0.9, "max_batch_tokens": 2048,
     "max_requests_per_batch": 256, "safety_margin": 0.0,
     "host": {"step_host_s": 0.004, "request_host_s": 2e-5, "host_launch_s": 7e-6}}

Every key is optional; what is left out keeps the hf-cb value. The iterations are still
priced with hf-cb's kernels (paged SDPA over gathered keys) and scheduled by the same
decode-first, chunked-prefill FIFO loop, so a prediction with a policy file is flagged
`unvalidated_engine`: nothing piep measured checks it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from piep.core.errors import ConfigError

SCHEDULER_KEYS = {"block_size": int, "kv_memory_share": float, "num_blocks": int,
                  "max_batch_tokens": int, "max_requests_per_batch": int,
                  "safety_margin": float, "pickup_s": float}
HOST_KEYS = ("step_host_s", "request_host_s", "host_launch_s", "eager_decode_launch_s",
             "launch_gap_w")
# host terms bounded by what a host can be: a scheduler iteration's or a request's own host
# work within a second, a kernel launch within a millisecond, the board between kernels
# within twice an H200's 700 W limit (the shipped profiles' terms are well inside these)
RANGES = {"kv_memory_share": (0.0, 1.0), "safety_margin": (0.0, 0.99), "pickup_s": (0.0, 1.0),
          "host.step_host_s": (0.0, 1.0), "host.request_host_s": (0.0, 1.0),
          "host.host_launch_s": (0.0, 1e-3), "host.eager_decode_launch_s": (0.0, 1e-3),
          "host.launch_gap_w": (0.0, 1400.0)}


@dataclass(frozen=True)
class UserPolicy:
    """A checked policy file: scheduler settings and host terms that replace hf-cb's."""
    name: str
    source: str
    scheduler: dict[str, float] = field(default_factory=dict)
    host: dict[str, float] = field(default_factory=dict)


def _number(path: str, key: str, value: Any, kind: type) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{path}: {key}={value!r} must be a finite number")
    if kind is int and value != int(value):
        raise ConfigError(f"{path}: {key}={value!r} must be an integer")
    lo, hi = RANGES.get(key, (0.0, math.inf))
    if not lo <= value <= hi or (kind is int and value < 1):
        bound = f"between {lo:g} and {hi:g}" if key in RANGES else (
            ">= 1" if kind is int else ">= 0")
        raise ConfigError(f"{path}: {key}={value!r} must be {bound}")
    return kind(value)


def read_policy(path: str | Path) -> UserPolicy:
    """A policy file, checked key by key (one line per problem, naming the key)."""
    from piep.core.artifacts import load_json
    from piep.core.errors import ArtifactError
    p = Path(path)
    try:
        doc = load_json(p)
    except ArtifactError as exc:
        raise ConfigError(f"--policy {exc}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"--policy {p}: give a JSON object of scheduler keys and 'host'")
    known = {"name", "host", *SCHEDULER_KEYS}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise ConfigError(f"--policy {p}: unknown key(s) {', '.join(unknown)}; known: "
                          f"{', '.join(sorted(known))}")
    if "num_blocks" in doc and "kv_memory_share" in doc:
        raise ConfigError(f"--policy {p}: give num_blocks or kv_memory_share, not both")
    where = f"--policy {p}"
    scheduler = {k: _number(where, k, doc[k], kind) for k, kind in SCHEDULER_KEYS.items()
                 if k in doc}
    host_doc = doc.get("host", {})
    if not isinstance(host_doc, dict):
        raise ConfigError(f"--policy {p}: 'host' must be an object of {', '.join(HOST_KEYS)}")
    bad = sorted(set(host_doc) - set(HOST_KEYS))
    if bad:
        raise ConfigError(f"--policy {p}: unknown host key(s) {', '.join(bad)}; known: "
                          f"{', '.join(HOST_KEYS)}")
    host = {k: _number(where, f"host.{k}", v, float) for k, v in host_doc.items()}
    return UserPolicy(name=str(doc.get("name", p.stem)), source=str(p), scheduler=scheduler,
                      host=host)

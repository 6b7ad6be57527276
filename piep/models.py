"""Shipped model configs (model_trees/<name>/config.json) and loading of user configs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from piep.artifacts import load_json, model_trees_dir
from piep.config import ModelSpec
from piep.errors import ArtifactError, ConfigError


@dataclass(frozen=True)
class ShippedModel:
    name: str
    config_path: Path
    source: dict[str, Any]


def shipped_models() -> list[ShippedModel]:
    return list(_shipped(str(model_trees_dir())))


@lru_cache(maxsize=4)
def _shipped(root_dir: str) -> tuple[ShippedModel, ...]:
    root = Path(root_dir)
    out = []
    for cfg in sorted(root.glob("*/config.json")):
        src_path = cfg.parent / "source.json"
        source = json.loads(src_path.read_text()) if src_path.is_file() else {}
        out.append(ShippedModel(cfg.parent.name, cfg, source))
    return tuple(out)


def _read_config(path: Path, name: str) -> ModelSpec:
    stat = path.stat()
    return _read_config_cached(str(path), name, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=256)
def _read_config_cached(path_str: str, name: str, mtime_ns: int, size: int) -> ModelSpec:
    """Configs are re-read when the file changes (mtime/size are part of the key)."""
    path = Path(path_str)
    try:
        config = load_json(path)
    except ArtifactError as exc:
        raise ConfigError(f"{exc}; pass a Hugging Face config.json") from None
    return ModelSpec.from_hf_config(config, name=name)


def no_shipped_models() -> ConfigError:
    """The error where the data folder holds no model configs (a wrong PIEP_HOME)."""
    import os
    root = model_trees_dir()
    home = os.environ.get("PIEP_HOME")
    why = f"PIEP_HOME={home} holds no model_trees/*/config.json" if home else \
        f"{root} holds no */config.json"
    return ConfigError(f"no shipped model configs: {why}; point PIEP_HOME at a piep checkout "
                       f"(or unset it), or give a path to a config.json")


def load_model(ref: str) -> ModelSpec:
    """A shipped name (`llama-2-7b`), a path to a config.json, or a model folder."""
    if not str(ref).strip():
        raise ConfigError("--model is empty: give a shipped name (`piep models`) or a path to "
                          "a config.json or a model folder")
    shipped = {m.name: m for m in _shipped(str(model_trees_dir()))}
    key = ref.strip().lower()
    if key in shipped:
        return _read_config(shipped[key].config_path, key)
    names = list(shipped)
    path = Path(ref).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ConfigError(f"{ref}: folder has no config.json")
        return _read_config(path / "config.json", path.name)
    if path.is_file():
        return _read_config(path, path.parent.name if path.name == "config.json" else path.stem)
    if path.exists():
        raise ConfigError(f"{ref} is neither a config.json file nor a model folder")
    if not names:
        raise no_shipped_models()
    import difflib
    close = difflib.get_close_matches(key, names, n=5, cutoff=0.3) or names[:5]
    raise ConfigError(f"unknown model {ref!r}: not a shipped name nor a path; closest: "
                      f"{', '.join(close)} (see `piep models`)")


# shapes in no public list widen the grid beyond the shipped models
SYNTHETIC = [
    {"hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 4,
     "intermediate_size": 5632, "vocab_size": 32000},
    {"hidden_size": 2560, "num_attention_heads": 20, "num_key_value_heads": 4,
     "intermediate_size": 6912, "vocab_size": 50304},
    {"hidden_size": 6144, "num_attention_heads": 48, "num_key_value_heads": 8,
     "intermediate_size": 16384, "vocab_size": 65536},
    {"hidden_size": 8192, "num_attention_heads": 64, "num_key_value_heads": 64,
     "intermediate_size": 30000, "vocab_size": 100000},
    # hidden sizes of no shipped model, FFN sizes of low alignment (GEMM
    # kernels change with the trailing zero bits of K and N)
    {"hidden_size": 4608, "num_attention_heads": 36, "num_key_value_heads": 4,
     "intermediate_size": 12300, "vocab_size": 64000},
    {"hidden_size": 1792, "num_attention_heads": 14, "num_key_value_heads": 2,
     "intermediate_size": 4850, "vocab_size": 32000},
    {"hidden_size": 3328, "num_attention_heads": 26, "num_key_value_heads": 2,
     "intermediate_size": 9000, "vocab_size": 32000},
    {"hidden_size": 7168, "num_attention_heads": 56, "num_key_value_heads": 8,
     "intermediate_size": 19000, "vocab_size": 64000},
    {"hidden_size": 2304, "num_attention_heads": 18, "num_key_value_heads": 6,
     "intermediate_size": 6150, "vocab_size": 32000},
    # head dims other than 128 (every shipped model has 128): 64, 96, 80
    {"hidden_size": 1536, "num_attention_heads": 24, "num_key_value_heads": 8,
     "intermediate_size": 4096, "vocab_size": 32000},
    {"hidden_size": 3072, "num_attention_heads": 32, "num_key_value_heads": 8,
     "intermediate_size": 8192, "vocab_size": 32000},
    {"hidden_size": 2880, "num_attention_heads": 36, "num_key_value_heads": 12,
     "intermediate_size": 7680, "vocab_size": 32000},
]


def synthetic_specs() -> list[ModelSpec]:
    base = {"model_type": "llama", "num_hidden_layers": 4, "hidden_act": "silu",
            "max_position_embeddings": 8192}
    return [ModelSpec.from_hf_config({**base, **s}, name=f"synthetic-{s['hidden_size']}")
            for s in SYNTHETIC]

"""Shipped model configs (model_trees/<name>/config.json) and loading of user configs."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from piep.core.artifacts import model_trees_dir, parse_json, read_text
from piep.core.config import ModelSpec
from piep.core.errors import ArtifactError, ConfigError


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
        # (transformers writes a float it holds as infinity as `Infinity`: Mamba's
        # `time_step_limit`; a key piep reads that holds one is refused by its type)
        config = parse_json(read_text(path), str(path), constants="names")
    except ArtifactError as exc:
        raise ConfigError(f"{exc}; pass a Hugging Face config.json") from None
    return ModelSpec.from_hf_config(config, name=name)


# a Hugging Face model ID: ORG/NAME
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache: $HF_HUB_CACHE, else $HF_HOME/hub, else the XDG cache's."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "huggingface" / "hub"


def _own_dir(repo_id: str) -> Path:
    """Where `piep models add` keeps a model ID's config.json."""
    from piep.core.artifacts import user_data_dir
    return user_data_dir() / "models" / repo_id.replace("/", "--")


def hub_config(repo_id: str) -> Path | None:
    """The config.json of a model ID: piep's own copy (`piep models add`), else the one in
    the Hugging Face hub cache (the snapshot its main ref names, else the newest), else the
    public copy piep carries (`public_configs`)."""
    own = _own_dir(repo_id) / "config.json"
    if own.is_file():
        return own
    repo = hf_cache_dir() / f"models--{repo_id.replace('/', '--')}"
    ref = repo / "refs" / "main"
    if ref.is_file():
        path = repo / "snapshots" / ref.read_text().strip() / "config.json"
        if path.is_file():
            return path
    found = sorted((repo / "snapshots").glob("*/config.json"), key=lambda p: p.stat().st_mtime)
    if found:
        return found[-1]
    public = public_configs(str(model_trees_dir())).get(repo_id.lower())
    return public[0] if public else None


@lru_cache(maxsize=4)
def public_configs(root_dir: str) -> dict[str, tuple[Path, str, str]]:
    """The public config.json copies piep carries (`model_trees/public/`, each read from
    the source its SOURCES.json names): model ID in lower case -> (path, the ID as
    written, its source), so that those IDs answer offline."""
    index = Path(root_dir) / "public" / "SOURCES.json"
    if not index.is_file():
        return {}
    return {s["hub_id"].lower(): (index.parent / f"{name}.json", s["hub_id"], s["source"])
            for name, s in json.loads(index.read_text()).items()}


def add_model(repo_id: str, *, revision: str = "main", timeout_s: float = 20.0,
              opener=None) -> Path:
    """Fetch a model ID's config.json - that one file: never code - from the Hugging Face
    hub ($HF_ENDPOINT, $HF_TOKEN for a gated model) into piep's data directory."""
    import urllib.error
    import urllib.request

    from piep.core.artifacts import output_set, parse_json, write_text
    if not HUB_ID.fullmatch(repo_id or ""):
        raise ConfigError(f"{repo_id!r}: a model ID is ORG/NAME (e.g. Qwen/Qwen3-8B)")
    if not re.fullmatch(r"[A-Za-z0-9._-]+", revision):
        raise ConfigError(f"--revision {revision!r}: a branch, tag or commit")
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    url = f"{endpoint}/{repo_id}/resolve/{revision}/config.json"
    request = urllib.request.Request(url, headers={"User-Agent": "piep"})
    if os.environ.get("HF_TOKEN"):
        request.add_header("Authorization", f"Bearer {os.environ['HF_TOKEN']}")
    try:
        with (opener or urllib.request.urlopen)(request, timeout=timeout_s) as resp:
            body = resp.read(16 * 1024 ** 2 + 1)
    except urllib.error.HTTPError as exc:
        why = {401: "gated or private: set HF_TOKEN", 403: "gated: accept its terms and set "
               "HF_TOKEN", 404: "no such model, revision or config.json"}.get(exc.code,
                                                                              f"HTTP {exc.code}")
        raise ConfigError(f"{repo_id}: {why} ({url})") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigError(f"{repo_id}: cannot reach {endpoint} ({reason}); offline, download "
                          f"its config.json yourself and give its path") from None
    if len(body) > 16 * 1024 ** 2:
        raise ConfigError(f"{url}: more than 16 MB: not a config.json")
    try:
        config = parse_json(body.decode(), url, constants="names")
    except (ArtifactError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{url}: not a config.json ({exc})") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{url}: not a config.json (a JSON object)")
    folder = _own_dir(repo_id)
    with output_set() as tx:  # the config and where it came from, together
        stage = tx.folder(folder, "config.json")
        write_text(stage / "config.json", json.dumps(config, indent=2) + "\n")
        write_text(stage / "source.json", json.dumps({"id": repo_id, "revision": revision,
                                                      "url": url}, indent=2) + "\n")
    return folder / "config.json"


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
    if HUB_ID.fullmatch(ref.strip()):
        found = hub_config(ref.strip())
        if found is None:
            raise ConfigError(f"{ref}: no config.json of it in the local Hugging Face cache "
                              f"({hf_cache_dir()}) nor piep's (`piep models` lists the model "
                              f"IDs piep carries); `piep models add {ref.strip()}` fetches "
                              f"that one file (online), or give a path to a config.json")
        return _read_config(found, ref.strip())
    if not names:
        raise no_shipped_models()
    raise ConfigError(f"unknown model {ref!r}: not a shipped name, a path nor a model ID "
                      f"(ORG/NAME); closest: {', '.join(closest(key, names))} (see `piep "
                      f"models`)")


def closest(key: str, names: list[str], n: int = 5) -> list[str]:
    """The shipped names and carried model IDs nearest to `key`, a bare name: an ID is
    matched by its name after the organization (`qwen3-8b` finds Qwen/Qwen3-8B)."""
    import difflib
    ids = {written.split("/", 1)[1].lower(): written
           for _, written, _ in public_configs(str(model_trees_dir())).values()}
    close = difflib.get_close_matches(key, [*names, *ids], n=n, cutoff=0.3) or names[:n]
    return [ids.get(c, c) for c in close]


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

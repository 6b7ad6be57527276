"""`piep models`: the shipped model configs."""

from __future__ import annotations

from piep.commands.common import emit
from piep.models import load_model, shipped_models
from piep.report.table import table


def configure(parser) -> None:
    pass


def run(args) -> int:
    from piep.models import no_shipped_models
    rows = []
    if not shipped_models():
        raise no_shipped_models()
    for m in shipped_models():
        spec = load_model(m.name)
        rows.append({"name": m.name, "model_type": spec.model_type, "params_b": spec.num_params() / 1e9,
                     "published_params_b": m.source.get("published_params", 0) / 1e9,
                     "layers": spec.num_layers, "hidden": spec.hidden_size,
                     "heads": spec.num_heads, "kv_heads": spec.num_kv_heads,
                     "head_dim": spec.head_dim, "ffn": spec.intermediate_size,
                     "vocab": spec.vocab_size, "attention": spec.attention,
                     "moe": spec.is_moe, "source": m.source.get("url")})
    def human(doc):
        rows = doc["models"]
        keys = ["name", "params_b", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn",
                "vocab", "attention"]
        return table([[r[k] for k in keys] + ["MoE" if r["moe"] else ""] for r in rows],
                     keys + [""])
    emit(args, {"schema": "piep.models", "schema_version": 1, "models": rows}, human)
    return 0

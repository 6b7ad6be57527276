"""`piep models`: the shipped model configs, and the model IDs piep answers offline."""

from __future__ import annotations

from piep.commands.common import emit
from piep.core.models import load_model, shipped_models
from piep.report.table import table


def configure(parser) -> None:
    parser.add_argument("action", nargs="?", choices=("add",),
                        help="add ORG/NAME: fetch a Hugging Face model's config.json (that "
                             "one file, never code) so that --model ORG/NAME answers offline")
    parser.add_argument("model_id", nargs="?", metavar="ORG/NAME")
    parser.add_argument("--revision", default="main", help="with add: a branch, tag or commit")


def run(args) -> int:
    if args.action == "add" or args.model_id:
        return _add(args)
    from piep.core.models import no_shipped_models
    rows, refused = [], []
    if not shipped_models():
        raise no_shipped_models()
    for m in shipped_models():
        spec = load_model(m.name)
        why = spec.unpriced
        if why:  # every command refuses it: not listed among the models piep answers
            refused.append({"name": m.name, "why": why})
            continue
        rows.append({"name": m.name, "model_type": spec.model_type,
                     "weights": "fp8" if spec.fp8_weights else spec.dtypes["weights"],
                     "checkpoint_dtype": spec.checkpoint_dtype,
                     "params_b": spec.num_params() / 1e9,
                     "published_params_b": m.source.get("published_params", 0) / 1e9,
                     "layers": spec.num_layers, "hidden": spec.hidden_size,
                     "heads": spec.num_heads, "kv_heads": spec.num_kv_heads,
                     "head_dim": spec.head_dim, "ffn": spec.intermediate_size,
                     "vocab": spec.vocab_size, "attention": spec.attention,
                     "moe": spec.is_moe, "source": m.source.get("url")})
    def human(doc):
        rows = doc["models"]
        keys = ["name", "model_type", "weights", "params_b", "layers", "hidden", "heads",
                "kv_heads", "head_dim", "ffn", "vocab", "attention"]
        ids = ", ".join(r["id"] for r in doc["model_ids"])
        return table([[r[k] for k in keys] for r in rows], keys) + "".join(
            f"\nnot answered: {r['name']}: {r['why']}" for r in doc["not_answered"]) + (
            f"\n\nmodel IDs answered offline from the public configs piep carries "
            f"({len(doc['model_ids'])}; sources: --json): {ids}" if ids else "")
    emit(args, {"schema": "piep.models", "schema_version": 1, "models": rows,
                "not_answered": refused, "model_ids": _model_ids()}, human)
    return 0


def _model_ids() -> list[dict]:
    """The model IDs of the public config.json copies piep carries (`model_trees/public/`),
    each with its model type and where the copy was read."""
    from piep.core.artifacts import model_trees_dir
    from piep.core.models import public_configs
    out = []
    for path, repo_id, source in sorted(public_configs(str(model_trees_dir())).values(),
                                        key=lambda v: v[1].lower()):
        out.append({"id": repo_id, "model_type": load_model(str(path)).model_type,
                    "source": source})
    return out


def _add(args) -> int:
    from piep.core.errors import ConfigError
    from piep.core.models import add_model
    if args.action != "add" or not args.model_id:
        raise ConfigError("give `piep models add ORG/NAME` (e.g. Qwen/Qwen3-8B)")
    path = add_model(args.model_id, revision=args.revision)
    try:
        spec, why = load_model(args.model_id), None
    except ConfigError as exc:  # kept: a later piep may price it
        spec, why = None, str(exc)
    doc = {"id": args.model_id, "config": str(path), "answered": spec is not None
           and spec.unpriced is None, "why": why or (spec and spec.unpriced)}
    emit(args, doc, lambda d: f"{d['id']}: config.json in {d['config']}" + (
        f"; piep answers it (--model {d['id']})" if d["answered"] else
        f"; not answered yet: {d['why']}"))
    return 0

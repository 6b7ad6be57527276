"""`piep tree MODEL`: the model tree of a deployment, as a table, JSON, or a saved file."""

from __future__ import annotations

from pathlib import Path

from piep.commands.common import add_deployment_args, emit, scenario_from_args
from piep.report.table import table


def configure(parser) -> None:
    parser.add_argument("model", nargs="?", help="shipped name or path to config.json / folder")
    parser.add_argument("--model", dest="model_flag", metavar="MODEL",
                        help="the same, as a flag (as in the other commands)")
    add_deployment_args(parser, model=False)
    parser.add_argument("--save", nargs="?", const="", default=None, metavar="PATH",
                        help="write the tree JSON (default ./tree_<model>_<layout>.json)")


def run(args) -> int:
    from piep.core.artifacts import write_json
    from piep.tree import build_tree
    from piep.core.errors import ConfigError
    if bool(args.model) == bool(args.model_flag):
        raise ConfigError("name the model once: `piep tree MODEL` or `piep tree --model MODEL`")
    dep = scenario_from_args(args, model=args.model or args.model_flag).deployment
    tree = build_tree(dep)
    doc = {"schema": "piep.model_tree", "schema_version": 1, "deployment": dep.describe(),
           "notes": list(dep.notes), "nodes": tree.size(), "totals": tree.totals(),
           "tree": tree.to_dict()}
    if args.save is not None:
        path = Path(args.save) if args.save else \
            Path(f"tree_{dep.model.name}_{dep.parallel.label()}.json")
        write_json(path, "piep.model_tree", 1, {k: v for k, v in doc.items()
                                                if k not in ("schema", "schema_version")},
                   config_hash=dep.model.config_hash())
        import logging
        logging.getLogger("piep").info("saved %s", path)

    def human(doc):
        rows = []
        for path, mult, node in tree.walk():
            depth = path.count("/")
            # a windowed engine's attention forms repeat a share of their layers' times
            shown = int(mult) if float(mult).is_integer() else round(mult, 2)
            # a compiled step's pointwise leaf runs as one fused kernel
            kind = f"{node.kind} (fused)" if node.attrs.get("fused") else node.kind
            rows.append(["  " * depth + node.name, kind, node.phase or "", shown,
                         node.flops, node.bytes_moved, node.comm_bytes,
                         node.group_size if node.is_comm else ""])
        head = f"{doc['deployment']}  ({doc['nodes']} nodes)\n"
        notes = "".join(f"note: {n}\n" for n in doc["notes"])
        return head + notes + table(rows, ["node", "kind", "phase", "x", "flops", "bytes",
                                           "comm_bytes", "group"])
    emit(args, doc, human)
    return 0

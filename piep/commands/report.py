"""`piep report`: per-module energy hotspot report (HTML + Markdown, with figures)."""

from __future__ import annotations

from piep.cli import add_deployment_args, emit


def configure(parser) -> None:
    add_deployment_args(parser)
    parser.add_argument("--measured", metavar="FILE.jsonl",
                        help="a piep measurement of this deployment to compare against")
    parser.add_argument("--out", required=True, metavar="FOLDER",
                        help="where report.html, report.md, figures/ and report.json go")
    parser.add_argument("--compare", nargs="+", metavar="MODEL@LAYOUT",
                        help="other deployments to compare on the same workload "
                             "(e.g. llama-2-13b@tp1)")
    parser.add_argument("--predictor", choices=("auto", "learned", "roofline"), default="auto")


def _measured(path: str, base: dict) -> dict:
    from piep.artifacts import read_jsonl
    from piep.errors import ArtifactError
    keys = ("tp", "pp", "dp", "batch", "prompt_len", "gen_len", "mode")
    for rec in read_jsonl(path):
        if rec.get("schema") == "piep.measurement" and all(rec.get(k) == base[k] for k in keys):
            return rec
    raise ArtifactError(f"{path}: no piep.measurement record with this layout and workload")


def run(args) -> int:
    from pathlib import Path

    from piep.report.hotspot import build_report
    base = {"gpu": args.gpu, "tp": args.tp, "pp": args.pp, "dp": args.dp, "batch": args.batch,
            "prompt_len": args.prompt_len, "gen_len": args.gen_len, "mode": args.mode,
            "predictor": args.predictor}
    measured = _measured(args.measured, base) if args.measured else None
    data = build_report(args.model, base, Path(args.out), measured=measured,
                        compare=args.compare)
    out = {"out": args.out, "files": ["report.html", "report.md", "report.json",
                                      *data["figures"].values()],
           "energy_j": data["prediction"]["energy_j"],
           "actions": [a["text"] for a in data["actions"]]}
    emit(args, out, lambda d: f"wrote {d['out']}/report.html and report.md\n"
                              + "\n".join(f"  {a}" for a in d["actions"]))
    return 0

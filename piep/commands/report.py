"""`piep report`: per-module energy hotspot report (HTML + Markdown, with figures)."""

from __future__ import annotations

from piep.commands.common import add_deployment_args, emit, scenario_from_args


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


def _measured(path: str, scn) -> dict:
    """The measurement of this deployment in `path`, checked: its schema's keys and
    types, a positive energy and time."""
    from piep.core.artifacts import read_records
    from piep.core.errors import ArtifactError
    p, w = scn.parallel, scn.workload
    want = {"tp": p.tp, "pp": p.pp, "dp": p.dp, "batch": w.batch, "prompt_len": w.prompt_len,
            "gen_len": w.gen_len, "mode": scn.mode}
    for rec in read_records(path, "piep.measurement", given=True):
        if all(rec.get(k) == v for k, v in want.items()):
            if rec["energy_j"] is None:
                raise ArtifactError(f"{path}: the record of this run has no energy (energy_j "
                                    f"null: a run without an energy meter); give one measured "
                                    f"on a GPU")
            return rec
    raise ArtifactError(f"{path}: no piep.measurement record with this layout and workload")


def run(args) -> int:
    from pathlib import Path

    from piep.core.artifacts import writable_folder
    from piep.report.hotspot import REPORT_SIGNATURE, build_report
    writable_folder(args.out, "--out", REPORT_SIGNATURE)
    scn = scenario_from_args(args)
    measured = _measured(args.measured, scn) if args.measured else None
    data = build_report(scn, Path(args.out), predictor=args.predictor, measured=measured,
                        compare=args.compare)
    out = {"out": args.out, "files": ["report.html", "report.md", "report.json",
                                      *data["figures"].values()],
           "energy_j": data["prediction"]["energy_j"],
           "actions": [a["text"] for a in data["actions"]]}
    emit(args, out, lambda d: f"wrote {d['out']}/report.html and report.md\n"
                              + "\n".join(f"  {a}" for a in d["actions"]))
    return 0

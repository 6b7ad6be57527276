"""`piep train`: fit the learned predictor on a GPU's committed calibration."""

from __future__ import annotations

import logging

from piep.commands.common import emit
from piep.gpus import DEFAULT_GPU

log = logging.getLogger("piep.train")


def configure(parser) -> None:
    parser.add_argument("--gpu", default=DEFAULT_GPU)
    parser.add_argument("--from-measurements", metavar="FILE.jsonl",
                        help="refit the combiner and the gap terms on your own end-to-end "
                             "records (piep.measurement JSONL) on top of the shipped model")
    parser.add_argument("--out", metavar="FOLDER",
                        help="where to write the predictor (default calibration/<gpu>/predictor)")


def run(args) -> int:
    from pathlib import Path

    from piep.predict.learned import load_learned, predictor_dir
    from piep.predict.store import save
    out = Path(args.out) if args.out else predictor_dir(args.gpu)
    if args.from_measurements:
        from piep.predict.train import refit_on_measurements
        model, n = refit_on_measurements(args.gpu, Path(args.from_measurements))
        save(model, out, refit_from=args.from_measurements)
        doc = {"predictor": str(out), "refit_records": n,
               "host_launch_s": model.host.host_launch_s,
               "gap_graph_s": model.host.gap_graph_s}
    else:
        from piep.predict.train import train_shipped

        def progress(i, n, name):
            log.info("leave-one-model-out %d/%d (held out: %s)", i, n, name)
        model, rows = train_shipped(args.gpu, progress=progress)
        save(model, out, command=f"piep train --gpu {args.gpu}")
        doc = {"predictor": str(out), "e2e_runs": len(rows),
               "module_samples": model.meta["module_samples"],
               "intervals_energy_log": model.intervals, "data_hash": model.meta["data_hash"]}
    load_learned.cache_clear()
    emit(args, doc, lambda d: "\n".join(f"{k}: {v}" for k, v in d.items()))
    return 0

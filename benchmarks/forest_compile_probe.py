"""Would compiled forests make the learned sweep fast enough? The module models' rows of
a 4,000-configuration sweep (benchmarks/speed.py's draw), evaluated by LightGBM (what
piep does) and by the same boosters compiled with lleaves (LLVM; not a piep dependency:
evidence for a decision, issue 36's sweep target).

    pip install --target /tmp/llv --no-deps lleaves "llvmlite==0.43.0"   # 1.3.0 needs < 0.44
    PIEP_LLEAVES=/tmp/llv python benchmarks/forest_compile_probe.py

Prints the seconds of each evaluator over the same rows, whether they agree to 1e-12,
and the one-off compile time (cacheable per predictor).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> int:
    if os.environ.get("PIEP_LLEAVES"):
        sys.path.append(os.environ["PIEP_LLEAVES"])  # after numpy's own
    try:
        import lleaves
    except ImportError:
        print("lleaves is not installed: see this file's doc for how to run it")
        return 1
    from speed import draw

    from piep import api
    from piep.core.errors import PiepError
    from piep.predict import module_models
    from piep.predict.table import TableBuilder
    deps = []
    for cfg in draw(4000):
        try:
            deps.append(api.deployment(**cfg))
        except PiepError:
            continue
    model = api.cost_model("h200", "learned")
    table = TableBuilder().table(deps)
    seen = []  # (kind model, the distinct rows its boosters evaluate)
    predict = module_models.KindModel.predict
    module_models.KindModel.predict = lambda self, x: (seen.append((self, x.copy())),
                                                      predict(self, x))[1]
    try:
        model.modules.predict(table, model.gpu)
    finally:
        module_models.KindModel.predict = predict
    lgb_s = compiled_s = compile_s = 0.0
    same = True
    with tempfile.TemporaryDirectory() as tmp:
        for km, x in seen:
            for forest in (km.time_booster, km.power_booster):
                booster = forest._booster
                t0 = time.perf_counter()
                want = booster.predict(x, num_threads=2)
                lgb_s += time.perf_counter() - t0
                path = f"{tmp}/model.txt"
                booster.save_model(path)
                t0 = time.perf_counter()
                compiled = lleaves.Model(model_file=path)
                compiled.compile()
                compile_s += time.perf_counter() - t0
                t0 = time.perf_counter()
                got = compiled.predict(x, n_jobs=2)
                compiled_s += time.perf_counter() - t0
                same &= bool(np.allclose(got, want, rtol=1e-12, atol=0.0))
    rows = sum(len(x) for _, x in seen)
    print(f"{len(deps)} valid configurations, {len(table):,} leaf rows, {rows:,} distinct rows "
          f"over {len(seen)} kind groups (two boosters each)")
    print(f"LightGBM {lgb_s:.3f} s, compiled (lleaves) {compiled_s:.3f} s, the same to "
          f"1e-12: {same}; compiling took {compile_s:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

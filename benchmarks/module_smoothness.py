"""The module models of the groups fitted with settings of their own (`GROUP_FITS` in
piep/predict/module_models.py) against the shared settings: the 5-fold module error on
held-out isolated shapes (as reports/accuracy.md computes it), and how smooth the fitted
time is over a grid of decode shapes: where a longer context is predicted faster than the
shorter one before it (a kernel over more keys takes no less time).

    python benchmarks/module_smoothness.py
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import accuracy  # noqa: E402

import piep.predict.module_models as mm  # noqa: E402
from piep.core.gpus import load_gpu  # noqa: E402
from piep.core.dataset import load_calibration  # noqa: E402
from piep.predict.features import base_time_s, leaf_features  # noqa: E402
from piep.tree.builder import leaf_from_shape  # noqa: E402

CONTEXTS = (64, 128, 256, 384, 512, 768, 1024, 1280, 1536, 1792, 2048, 2560, 3072, 3584,
            4096, 5120, 6144, 8192, 12288, 16384)
HEADS = (4, 6, 8, 12, 14, 16, 20, 24, 28, 32, 40, 48, 64)  # query heads on one GPU
HEAD_DIMS = (64, 128)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)


def decode_grid(kind: str, gpu) -> tuple[np.ndarray, np.ndarray]:
    """Features and roofline base time of decode leaves of `kind`: one row per (heads,
    head dim, batch), one column per context (K/V expanded to every head, as transformers'
    static cache reads them)."""
    rows = [[leaf_from_shape(dict(kind=kind, phase="decode", heads=h, kv_heads=h, head_dim=d,
                                  batch=b, context_len=c, q_len=1, tokens=b))
             for c in CONTEXTS] for h, d, b in itertools.product(HEADS, HEAD_DIMS, BATCHES)]
    x = np.array([[leaf_features(leaf, gpu, "graph") for leaf in row] for row in rows])
    base = np.array([[base_time_s(leaf, gpu) for leaf in row] for row in rows])
    return x, base


def drops(model, x: np.ndarray, base: np.ndarray) -> tuple[float, float]:
    """(largest, share above 5 %) of the drops in predicted time from one context to the
    next over the grid (drop: 1 - time / the most time at any shorter context)."""
    log_ratio, _, _ = model.predict(x.reshape(-1, x.shape[-1]))
    t = base * np.exp(log_ratio.reshape(base.shape))
    drop = 1 - t[:, 1:] / np.maximum.accumulate(t, axis=1)[:, :-1]
    return float(drop.max()), float((drop > 0.05).mean())


def main() -> int:
    gpu = load_gpu("h200")
    cal = load_calibration("h200")
    own = dict(mm.GROUP_FITS)
    print("| group | settings | 5-fold module energy error | time error | largest drop over "
          "the context grid | steps dropping more than 5 % |")
    print("|---|---|---|---|---|---|")
    for group in sorted(own):
        subset = SimpleNamespace(  # the group's samples alone (module_cv's folds over them)
            modules=[r for r in cal.modules if mm.model_group(
                r.kind, r.phase == "decode", r.mode == "eager") == group],
            host=cal.host)
        x, base = decode_grid(group, gpu)
        for label, fits in (("shared", {}), ("its own", own)):
            mm.GROUP_FITS.clear()
            mm.GROUP_FITS.update(fits)
            (_, n, energy, time), = [row for row in accuracy.module_cv(subset, gpu)
                                     if row[0] == group]
            model = mm.fit_module_models(subset.modules, gpu)[group]
            worst, share = drops(model, x, base)
            print(f"| {group} | {label} | {energy:.1f} % ({n} samples) | {time:.1f} % | "
                  f"{100 * worst:.0f} % | {100 * share:.1f} % of {base.size - len(base)} |")
    mm.GROUP_FITS.clear()
    mm.GROUP_FITS.update(own)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

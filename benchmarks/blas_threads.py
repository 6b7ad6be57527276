"""Which of numpy's BLAS products run on more than one thread here, and what a second
thread costs: the CPU time other threads of the process spend during one product and
the 0.3 s after it (OpenBLAS's threads spin a while after a parallel product before
they sleep). The shapes are the sweep's: the combiner's matrix-vector product (rows x 8
features), the range tests' float32 products (rows x 16 features @ 16 x samples) and the
leaf table's (deployments x 8 basis terms @ 8 x quantities). `piep.predict.table.product` keeps
its blocks below the largest one-thread sizes printed here.

    python benchmarks/blas_threads.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from piep.predict.table import MATRIX_MNK, VECTOR_ELEMENTS  # noqa: E402

VECTORS = (8_192, 32_768, 50_000, 189_140)           # rows of (rows x 8) @ (8,)
MATRICES = ((2_048, 16, 16), (4_096, 16, 16), (1_024, 16, 64), (80, 8, 406), (400, 8, 406))


def helper_cpu_s(fn, repeat: int = 3) -> float:
    """The least CPU time other threads spent during `fn()` and 0.3 s after it."""
    spent = []
    for _ in range(repeat):
        time.sleep(0.4)  # threads of an earlier product asleep again
        p0, t0 = time.process_time(), time.thread_time()
        fn()
        time.sleep(0.3)
        spent.append((time.process_time() - p0) - (time.thread_time() - t0))
    return max(0.0, min(spent))


def main() -> int:
    rng = np.random.default_rng(0)
    print("| product | size | CPU of other threads (ms) |")
    print("|---|---|---|")
    for rows in VECTORS:
        f, w = rng.random((rows, 8)), rng.random(8)
        print(f"| ({rows:,} x 8) @ (8,) | {rows * 8:,} elements | "
              f"{1e3 * helper_cpu_s(lambda: f @ w):.0f} |")
    for m, k, n in MATRICES:
        dtype = np.float32 if k == 16 else np.float64
        a, b = rng.random((m, k)).astype(dtype), rng.random((k, n)).astype(dtype)
        print(f"| ({m:,} x {k}) @ ({k} x {n}) | m.n.k {m * n * k:,} | "
              f"{1e3 * helper_cpu_s(lambda: a @ b):.0f} |")
    print(f"piep.predict.table.product blocks: {VECTOR_ELEMENTS:,} elements (matrix-vector), "
          f"m.n.k {MATRIX_MNK:,} (matrix)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

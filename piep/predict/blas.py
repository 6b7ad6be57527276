"""Matrix products kept on one BLAS thread.

numpy's OpenBLAS runs a large product on every core, and its threads then spin about
0.1 s before they sleep: on this machine of two cores, a matrix-vector product of
189,140 x 8 (the combiner's, in a sweep of 4,000 configurations) or a float32 product of
m.n.k 1,048,576 (a range test's block) left about 104 ms of CPU spinning beside the
main thread, while one of 50,000 x 8 or of m.n.k 524,288 ran on one thread
(`python benchmarks/blas_threads.py`). The spinning took the cycles of the forests'
worker thread (`piep.predict.gbdt.predict_aside`) and of the steps after it. A product
here is taken a block of rows at a time, each block below those sizes. Rows do not mix
in a product: the blocks give each row the numbers the whole product gives
(tests/predict/test_gbdt.py).
"""

from __future__ import annotations

import numpy as np

VECTOR_ELEMENTS = 1 << 16  # rows x inner size of a matrix-vector product's block
MATRIX_MNK = 1 << 18       # rows x inner size x columns of a matrix product's block


def product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`a @ b` (`a` 2-D; `b` a vector or a matrix), a block of `a`'s rows at a time."""
    inner = a.shape[1] * (b.shape[1] if b.ndim == 2 else 1)
    per = max(1, (VECTOR_ELEMENTS if b.ndim == 1 else MATRIX_MNK) // max(inner, 1))
    if len(a) <= per:
        return a @ b
    out = np.empty((len(a),) + b.shape[1:], dtype=np.result_type(a, b))
    for i in range(0, len(a), per):
        np.matmul(a[i:i + per], b, out=out[i:i + per])
    return out

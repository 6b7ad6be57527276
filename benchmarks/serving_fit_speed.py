"""How long one fit of hf-cb's serving profile takes on the committed replays (no held-out
folds; `piep train --engine hf-cb` runs it once more per shape held out), and the terms
it gives (to compare between commits: the same terms to the last digit).

    python benchmarks/serving_fit_speed.py [MAXITER]   # default 60 Nelder-Mead iterations
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from piep import api  # noqa: E402
from piep.fit.serving import FITTED, fit_cb_profile, shipped_replays  # noqa: E402


def main() -> int:
    maxiter = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    base = api.cost_model("h200", "learned")
    records = shipped_replays("h200")
    t0 = time.perf_counter()
    profile = fit_cb_profile(base, records, maxiter=maxiter)
    dt = time.perf_counter() - t0
    print(f"hf-cb, {len(records)} replays, one fit at maxiter {maxiter}: {dt:.1f} s")
    for name in FITTED:
        print(f"  {name} = {profile.host.term(name)!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The collectives sampler's logic on 2, 4 and 8 CPU processes (gloo) with a fake counter."""

import json
import os
import subprocess
import sys

import pytest
from _paths import TESTS  # noqa: E402

pytestmark = pytest.mark.gloo

pytest.importorskip("torch")
WORKER = TESTS / "_collectives_worker.py"


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 4, 8])
def test_every_process_count_writes_one_row_per_point(tmp_path, n):
    out = tmp_path / "c.jsonl"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
                           str(n), "--standalone", str(WORKER), str(out)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["kind"], r["size_bytes"]) for r in rows] == [
        (k, s) for k in ("allreduce", "allgather", "p2p") for s in (8192, 65536)]
    for r in rows:
        assert r["schema"] == "piep.collective_sample" and r["group_size"] == n
        assert r["mode"] == "eager" and r["time_s"] > 0 and r["calls"] >= 1
        assert len(r["energy_j_per_gpu"]) == n and all(e is not None for e in r["energy_j_per_gpu"])

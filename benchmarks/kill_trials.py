"""`kill -9` at random points of the commands that write several files or a fitted model,
and what each kill left: the old outputs or the new ones, each whole (never a mix), and,
after the next run, nothing of the killed runs beside them.

Each case runs its command twice to completion (old arguments, then new ones: two
different outputs at the same place), then, from the old outputs each time, starts the
new command and kills it (SIGKILL) after a random share (0.2-1.05) of its own duration,
and compares what is there with the two snapshots. At the end one more run of the new
command must leave exactly the new outputs and nothing else in their folders.

    python benchmarks/kill_trials.py [--kills 50] [--cases report,serve,...] [--seed 0]
                                     [--root CHECKOUT]    # another checkout's piep

Prints, per case, the kills that left the old state, the new one, a mix (or nothing), and
the leftovers after the next run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _records(tmp: Path) -> None:
    """Inputs of the fits: two sets of reference-runner runs, two of hf-static runs."""
    ref = (ROOT / "calibration/h200/e2e/raw/e2e_2gpu.jsonl").read_text().splitlines()
    (tmp / "ref_a.jsonl").write_text("\n".join(ref[:6]) + "\n")
    (tmp / "ref_b.jsonl").write_text("\n".join(ref[6:12]) + "\n")
    rows = [json.loads(line) for f in sorted((ROOT / "calibration/h200/engines/hf-static/raw")
                                             .glob("*.jsonl"))
            for line in f.read_text().splitlines() if '"piep.measurement"' in line]
    for name, model in (("static_a.jsonl", "llama-2-7b"), ("static_b.jsonl", "llama-3-8b")):
        mine = [{**r, "engine": {**r["engine"], "name": "my-static"}}
                for r in rows if r.get("model") == model][:8]
        (tmp / name).write_text("".join(json.dumps(r) + "\n" for r in mine))


# case -> (old arguments, new arguments, the outputs it writes (relative to the folder))
CASES = {
    "report": (["report", "--model", "llama-2-7b", "--out", "r"],
               ["report", "--model", "llama-2-13b", "--batch", "4", "--out", "r"], ["r"]),
    "serve": (["serve", "--model", "llama-3-8b", "--rate", "2", "--requests", "40", "--out", "s",
               "--plot", "s.png"],
              ["serve", "--model", "llama-3-8b", "--rate", "3", "--requests", "60", "--out", "s",
               "--plot", "s.png"], ["s", "s.png"]),
    "train-refit": (["train", "--from-measurements", "ref_a.jsonl"],
                    ["train", "--from-measurements", "ref_b.jsonl"], ["data/h200/predictor"]),
    "train-engine": (["train", "--engine", "my-static", "--like", "hf-static",
                      "--from-measurements", "static_a.jsonl"],
                     ["train", "--engine", "my-static", "--like", "hf-static",
                      "--from-measurements", "static_b.jsonl"],
                     ["data/h200/engines/my-static/profile.json"]),
    "sweep": (["sweep", "--model", "llama-2-7b", "--batch", "1", "2", "--out", "sw.csv"],
              ["sweep", "--model", "llama-2-7b", "llama-3-8b", "--batch", "1", "2", "4", "8",
               "--tp", "1", "2", "--out", "sw.csv"], ["sw.csv"]),
}


def snapshot(base: Path, outputs: list[str]) -> dict[str, str]:
    """Every file of the outputs (path relative to `base` -> sha256 of its bytes)."""
    out = {}
    for rel in outputs:
        path = base / rel
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for f in files:
            out[str(f.relative_to(base))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def leftovers(base: Path, outputs: list[str]) -> list[str]:
    """What stands beside the outputs (in their folders) that is none of them."""
    found = []
    for rel in outputs:
        folder = (base / rel).parent
        keep = {Path(o).name for o in outputs if (base / o).parent == folder}
        if folder.is_dir():
            found += [str((folder / n).relative_to(base)) for n in os.listdir(folder)
                      if n not in keep and (folder / n).suffix != ".jsonl"
                      and n not in ("data", "saved")]
    return sorted(set(found))


def _run(argv: list[str], cwd: Path, env: dict, timeout: float = 600) -> float:
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "piep", *argv], cwd=cwd, env=env, check=True,
                   capture_output=True, timeout=timeout)
    return time.monotonic() - t0


def _restore(base: Path, saved: Path, outputs: list[str]) -> None:
    """The outputs as the old run left them (saved in `saved`)."""
    for rel in outputs:
        path = base / rel
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        if (saved / rel).is_dir():
            shutil.copytree(saved / rel, path)
        elif (saved / rel).exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(saved / rel, path)


def trial(case: str, kills: int, seed: int = 0, root: Path = ROOT) -> dict[str, object]:
    """Counts of what `kills` kills of one case left (old, new, mixed) and the leftovers
    after the next run."""
    old_argv, new_argv, outputs = CASES[case]
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as t:
        base = Path(t)
        _records(base)
        env = {**os.environ, "PIEP_DATA_DIR": str(base / "data"), "PYTHONPATH": str(root),
               "PYTHONHASHSEED": "0"}
        _run(old_argv, base, env)
        old = snapshot(base, outputs)
        saved = base / "saved"
        for rel in outputs:
            _restore(saved, base, [rel])
        duration = _run(new_argv, base, env)
        new = snapshot(base, outputs)
        counts = {"old": 0, "new": 0, "mixed": 0}
        for _ in range(kills):
            _restore(base, saved, outputs)
            proc = subprocess.Popen([sys.executable, "-m", "piep", *new_argv], cwd=base, env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.2, 1.05) * duration)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            state = snapshot(base, outputs)
            counts["old" if state == old else "new" if state == new else "mixed"] += 1
        left_by_kills = leftovers(base, outputs)
        _run(new_argv, base, env)
        final = snapshot(base, outputs)
        return {"case": case, "kills": kills, **counts, "left_by_kills": len(left_by_kills),
                "after_next_run": leftovers(base, outputs), "next_run_is_new": final == new,
                "duration_s": round(duration, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout whose piep runs")
    args = ap.parse_args()
    print("| case | kills | old | new | mixed or missing | leftovers after the kills | "
          "after the next run |")
    print("|---|---|---|---|---|---|---|")
    for case in args.cases.split(","):
        r = trial(case, args.kills, args.seed, args.root.resolve())
        print(f"| {case} | {r['kills']} | {r['old']} | {r['new']} | {r['mixed']} | "
              f"{r['left_by_kills']} | {len(r['after_next_run'])} "
              f"{'(new, whole)' if r['next_run_is_new'] else '(NOT the new outputs)'} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

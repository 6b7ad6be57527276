"""How long piep takes to answer from the command line, against a bare interpreter's start
(medians of N runs each, interleaved so that the machine's load hits all alike):
`python -c pass`, `piep --help`, `piep predict --model llama-2-7b`, and predict's answer
unchanged byte for byte between runs. Targets (issue 36): predict <= 8x, --help <= 3x.
Python's bytecode caches are on, in a folder of their own, and filled by a first run that
is not timed: an installed piep starts from compiled modules (a shell that sets
PYTHONDONTWRITEBYTECODE, as this machine's does, would recompile piep on every start).

    python benchmarks/startup.py [N] [--write]   # --write: reports/speed.md
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = {"bare interpreter": [sys.executable, "-c", "pass"],
         "piep --help": [sys.executable, "-m", "piep", "--help"],
         "piep predict": [sys.executable, "-m", "piep", "predict", "--model", "llama-2-7b",
                          "--json"]}
TARGETS = {"piep --help": 3.0, "piep predict": 8.0}


def main() -> int:
    n = int(next((a for a in sys.argv[1:] if a.isdigit()), 9))
    times: dict[str, list[float]] = {k: [] for k in CASES}
    answers = set()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="piep-startup-pycache-")
    for argv in CASES.values():  # fills the bytecode cache
        subprocess.run(argv, cwd="/tmp", capture_output=True, check=True, env=env)
    for _ in range(n):
        for name, argv in CASES.items():
            t0 = time.perf_counter()
            out = subprocess.run(argv, cwd="/tmp", capture_output=True, check=True,
                                 env=env).stdout
            times[name].append(time.perf_counter() - t0)
            if name == "piep predict":
                answers.add(out)
    bare = statistics.median(times["bare interpreter"])
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    lines = [f"# piep from the command line (commit {commit}, medians of {n} runs)", "",
             "| command | median s | x bare interpreter | target |", "|---|---|---|---|"]
    for name in CASES:
        med = statistics.median(times[name])
        target = f"<= {TARGETS[name]:g}x" if name in TARGETS else ""
        shown = "python -c pass" if name == "bare interpreter" else " ".join(CASES[name][2:])
        lines.append(f"| `{shown}` | {med:.3f} | "
                     f"{med / bare:.1f} | {target} |")
    lines += ["", f"predict's answer identical over the {n} runs: {len(answers) == 1}; "
              "bytecode caches on, filled by a first run not timed",
              "", "Made by `python benchmarks/startup.py --write`."]
    text = "\n".join(lines) + "\n"
    print(text)
    if "--write" in sys.argv:
        (ROOT / "reports" / "speed.md").write_text(text)
    return 0 if len(answers) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())

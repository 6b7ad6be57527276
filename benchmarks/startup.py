"""How long piep takes to answer from the command line, against a bare interpreter's start
(medians of N runs each, interleaved so that the machine's load hits all alike):
`python -c pass`, `piep --help`, `piep predict --model llama-2-7b`, the README's first
command (its table), and predict's answer
unchanged byte for byte between runs. Targets (issue 36): predict <= 8x, --help <= 3x.
Python's bytecode caches are on, in a folder of their own, and filled by a first run that
is not timed: an installed piep starts from compiled modules (a shell that sets
PYTHONDONTWRITEBYTECODE, as this machine's does, would recompile piep on every start).

    python benchmarks/startup.py [N]   # reports/speed.md: python benchmarks/speed.py --write
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
                          "--json"],
         # the README's first command, as a new user types it (the table it prints)
         "README's predict": [sys.executable, "-m", "piep", "predict", "--model", "llama-2-7b",
                              "--gpu", "h200", "--tp", "2", "--batch", "16", "--prompt-len",
                              "512", "--gen-len", "128"]}
TARGETS = {"piep --help": 3.0, "piep predict": 8.0, "README's predict": 8.0}


def measure(n: int = 9) -> tuple[dict[str, float], bool]:
    """Median seconds of each case over `n` interleaved runs, and whether predict's answer
    was the same bytes every time."""
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
    return {k: statistics.median(v) for k, v in times.items()}, len(answers) == 1


def main() -> int:
    n = int(next((a for a in sys.argv[1:] if a.isdigit()), 9))
    med, same = measure(n)
    bare = med["bare interpreter"]
    lines = [f"piep from the command line (medians of {n} runs)", "",
             "| command | median s | x bare interpreter | target |", "|---|---|---|---|"]
    for name in CASES:
        target = f"<= {TARGETS[name]:g}x" if name in TARGETS else ""
        shown = "python -c pass" if name == "bare interpreter" else " ".join(CASES[name][2:])
        lines.append(f"| `{shown}` | {med[name]:.3f} | {med[name] / bare:.1f} | {target} |")
    lines += ["", f"predict's answer identical over the {n} runs: {same}; bytecode caches "
              "on, filled by a first run not timed (`python benchmarks/speed.py --write` puts "
              "these figures in reports/speed.md with the others)"]
    print("\n".join(lines))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Regenerate the example hotspot reports in reports/ with the shipped predictor.

    python benchmarks/example_reports.py

Each report is `piep report` with the arguments listed here (the same command a user
would type), so the examples always match the shipped predictor and frequency model.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

EXAMPLES = {
    "llama-2-13b-tp1": ["--model", "llama-2-13b", "--batch", "16"],
    "llama-2-7b-tp2-vs-13b-tp1": ["--model", "llama-2-7b", "--tp", "2", "--batch", "16",
                                  "--compare", "llama-2-13b@tp1"],
    "llama-3-70b-tp2": ["--model", "llama-3-70b", "--tp", "2", "--batch", "8"],
}


def main() -> int:
    for name, args in EXAMPLES.items():
        cmd = [sys.executable, "-m", "piep", "report", *args, "--out", f"reports/{name}"]
        print("$", " ".join(["piep", *cmd[3:]]), flush=True)
        subprocess.run(cmd, cwd=ROOT, check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

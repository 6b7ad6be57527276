"""`piep env`: versions, GPUs seen, calibrations present."""

from __future__ import annotations

import importlib.util
import platform

from piep import __version__
from piep.commands.common import emit


def _version(mod: str) -> str | None:
    if importlib.util.find_spec(mod) is None:
        return None
    try:
        return getattr(__import__(mod), "__version__", "present")
    except Exception as exc:  # a broken optional install must not break `piep env`
        return f"broken ({type(exc).__name__})"


def configure(parser) -> None:
    pass


def run(args) -> int:
    from piep.artifacts import data_root
    from piep.device import list_gpus
    from piep.gpus import known_gpus
    root = data_root()
    cal = {}
    for gpu in known_gpus():
        folder = root / "calibration" / gpu
        cal[gpu] = sorted(p.name for p in folder.iterdir() if p.is_dir() or p.suffix == ".json")
    doc = {"schema": "piep.env", "schema_version": 1, "piep": __version__,
           "python": platform.python_version(), "platform": platform.platform(),
           "packages": {m: _version(m) for m in ("numpy", "scipy", "lightgbm", "matplotlib",
                                                 "transformers", "torch", "pynvml")},
           "gpus": list_gpus(), "data_root": str(root), "calibrations": cal}

    def human(d):
        lines = [f"piep {d['piep']}  python {d['python']}  {d['platform']}"]
        lines += [f"  {k:12s} {v or 'not installed'}" for k, v in d["packages"].items()]
        lines.append("GPUs: " + (", ".join(f"{g['index']}: {g['name']} ({g['uuid']})"
                                          for g in d["gpus"]) or "none seen"))
        lines.append(f"data: {d['data_root']}")
        lines += [f"calibration {g}: {', '.join(items)}" for g, items in d["calibrations"].items()]
        return "\n".join(lines)
    emit(args, doc, human)
    return 0

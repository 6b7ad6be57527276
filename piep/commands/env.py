"""`piep env`: versions, GPUs seen, calibrations present."""

from __future__ import annotations

import importlib.util
import platform

from piep import __version__
from piep.commands.common import HOST_PROBES, board_probe_here, emit, host_probe_here


def _version(mod: str) -> str | None:
    if importlib.util.find_spec(mod) is None:
        return None
    try:
        return getattr(__import__(mod), "__version__", "present")
    except Exception as exc:  # a broken optional install must not break `piep env`
        return f"broken ({type(exc).__name__})"


def configure(parser) -> None:
    parser.add_argument("--host-probe", action="store_true",
                        help="measure this host's launch probe (needs torch and a CUDA GPU; "
                             "the median of %d probes: one alone varies within a run on a "
                             "shared host, reports/engines.md): what `predict --host-probe-us` "
                             "takes for hf-eager, hf-static and hf-cb" % HOST_PROBES)
    parser.add_argument("--board-probe", action="store_true",
                        help="measure this GPU board's probe (the power of a decode-like "
                             "GEMM and of an HBM copy, as engine runs record it; needs torch, "
                             "a CUDA GPU and NVML; ~3 s): boards of one kind draw different "
                             "power, reports/engines.md")




def _board_probe() -> dict[str, float]:
    """This board's probe powers, or one line saying what it needs."""
    from piep.core.errors import ConfigError
    p = board_probe_here()
    if p is None:
        raise ConfigError("--board-probe needs torch, a CUDA GPU and NVML: run it on the GPU "
                          "that runs the engine")
    return {"decode_gemm_w": p["decode_gemm_power_w"], "copy_w": p["copy_power_w"]}


def _host_probe() -> dict[str, float]:
    """This host's launch probe, or one line saying what it needs."""
    from piep.core.errors import ConfigError
    p = host_probe_here(repeats=HOST_PROBES)
    if p is None:
        raise ConfigError("--host-probe needs torch and a CUDA GPU: run it on the host that "
                          "runs the engine")
    out = {"launch_us": p["launch_add_s"] * 1e6,
           "python_loop_200k_ms": p["python_loop_200k_s"] * 1e3}
    if "tiny_decode_step_s" in p:
        out["tiny_decode_step_ms"] = p["tiny_decode_step_s"] * 1e3
    return out


def _predictors(gpus) -> dict:
    """Which predictor answers for each GPU: the user's refit, or the shipped one."""
    from piep.predict.store import answering_predictor_dir, user_predictor_dir
    out = {}
    for gpu in gpus:
        folder = answering_predictor_dir(gpu)
        if folder is not None:
            out[gpu] = {"folder": str(folder), "source": "your refit (piep train "
                        "--from-measurements)" if folder == user_predictor_dir(gpu)
                        else "shipped"}
            from piep.predict.store import load_learned
            moved = (load_learned(gpu).meta or {}).get("moves_shipped")
            if moved:
                out[gpu]["moves_shipped"] = moved
    return out


def _fitted(gpus) -> dict:
    """Every fitted artifact a prediction reads, per GPU, and whose it is: the user's own
    (the user data directory) or the shipped one (piep.core.artifacts.fitted looks them up)."""
    from piep.core.artifacts import fitted, user_data_dir
    from piep.predict.engines import known_profiles
    out = {}
    for gpu in gpus:
        parts = {"predictor": ("predictor", "predictor.json"),
                 "frequency model": ("dvfs", "freq_model.json"),
                 **{f"engine {name}": ("engines", name, "profile.json")
                    for name in known_profiles(gpu)}}
        found = {}
        for what, where in parts.items():
            path = fitted(gpu, *where)
            if path is not None:
                mine = user_data_dir() in path.parents
                found[what] = {"path": str(path), "source": "yours" if mine else "shipped"}
        out[gpu] = found
    return out


def run(args) -> int:
    from piep.core.artifacts import calibration_dir, data_root
    from piep.device import list_gpus
    from piep.core.gpus import known_gpus
    root = data_root()
    cal = {}
    for gpu in known_gpus():  # shipped, or the user's own (`piep calibrate gpu`)
        folder = calibration_dir(gpu)
        cal[gpu] = sorted(p.name for p in folder.iterdir() if p.is_dir() or p.suffix == ".json")
    from piep.predict.engines import known_profiles
    from piep.core.engines import ENGINES, names
    from piep.core.scenario import describe_engine
    engines = [{"name": name, "gpu": None, "version": __version__,
                "description": ENGINES[name].description, "runs": None}
               for name in names(reference=True)]
    for gpu in known_gpus():
        for name, prof in known_profiles(gpu).items():
            engines.append({"name": name, "gpu": gpu, "version": prof.version,
                            "description": describe_engine(name, prof.like),
                            **({"like": prof.like} if prof.like else {}),
                            "runs": prof.meta.runs,
                            "tp_measured": prof.meta.tp_measured,
                            "lomo_energy_mape": prof.meta.lomo_energy_mape,
                            "host_probe_ref_us": 1e6 * prof.host.host_probe_ref_s
                            if prof.host.host_probe_ref_s else None})
    doc = {"schema": "piep.env", "schema_version": 1, "piep": __version__,
           "python": platform.python_version(), "platform": platform.platform(),
           "packages": {m: _version(m) for m in ("numpy", "scipy", "lightgbm", "matplotlib",
                                                 "transformers", "torch", "pynvml")},
           "gpus": list_gpus(), "data_root": str(root), "calibrations": cal,
           "predictors": _predictors(known_gpus()), "engines": engines,
           "fitted": _fitted(known_gpus())}
    if getattr(args, "host_probe", False):
        doc["host_probe"] = _host_probe()
    if getattr(args, "board_probe", False):
        doc["board_probe"] = _board_probe()

    def human(d):
        lines = [f"piep {d['piep']}  python {d['python']}  {d['platform']}"]
        lines += [f"  {k:12s} {v or 'not installed'}" for k, v in d["packages"].items()]
        lines.append("GPUs: " + (", ".join(f"{g['index']}: {g['name']} ({g['uuid']})"
                                          for g in d["gpus"]) or "none seen"))
        lines.append(f"data: {d['data_root']}")
        lines += [f"calibration {g}: {', '.join(items)}" for g, items in d["calibrations"].items()]
        lines += [f"predictor {g}: {p['source']} ({p['folder']})"
                  for g, p in d["predictors"].items()]
        for g, items in d["fitted"].items():
            lines.append(f"fitted for {g} (what predictions read): " + ", ".join(
                f"{what} {i['source']}" for what, i in items.items()))
        lines.append("engines (--engine):")
        for e in d["engines"]:
            lomo = e.get("lomo_energy_mape")  # None: fitted on one model's runs
            where = "piep's own runner" if e["gpu"] is None else \
                f"profile on {e['gpu']}: {e['runs']} runs, tp {e['tp_measured']}, LOMO energy " \
                + ("-" if lomo is None else f"{lomo:.1f} %")
            if e.get("host_probe_ref_us"):
                where += f", host probe {e['host_probe_ref_us']:.1f} us"
            lines.append(f"  {e['name']:11s} {e['version']:8s} {e['description']} ({where})")
        if "host_probe" in d:
            hp = d["host_probe"]
            lines.append(f"this host: launch probe {hp['launch_us']:.1f} us "
                         f"(predict --host-probe-us), Python loop "
                         f"{hp['python_loop_200k_ms']:.1f} ms"
                         + (f", tiny eager decode step {hp['tiny_decode_step_ms']:.2f} ms"
                            if "tiny_decode_step_ms" in hp else ""))
        if "board_probe" in d:
            bp = d["board_probe"]
            lines.append(f"this board: decode-GEMM probe {bp['decode_gemm_w']:.0f} W, HBM copy "
                         f"{bp['copy_w']:.0f} W")
        return "\n".join(lines)
    emit(args, doc, human)
    return 0

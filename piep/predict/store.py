"""Files of the learned predictor: `predictor.json` (collectives, host terms, combiner,
intervals, the module models' normalization) beside LightGBM's own text models
(`<group>.time.txt`, `<group>.power.txt`)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from piep.core.artifacts import output_set, read_json, read_text, write_json, write_text
from piep.core.gpus import GPU
from piep.predict.collectives import Collectives
from piep.predict.features import FEATURES
from piep.predict.host import HostTerms
from piep.predict.learned import FEATURES as ALPHA_FEATURES
from piep.predict.learned import Combiner, LearnedModel
from piep.predict.module_models import KindModel, ModuleModels

SCHEMA = "piep.learned_predictor"
SCHEMA_VERSION = 1
SIGNATURE = "predictor.json"  # the document of a predictor's folder (beside its models)


def _curves(table: dict) -> dict[str, Any]:
    return {f"{k[0]}|{k[1]}": v for k, v in table.items()}


def _uncurves(doc: dict) -> dict[tuple[str, str], Any]:
    return {tuple(key.split("|")): tuple(v) for key, v in doc.items()}


def save(model: LearnedModel, folder: Path, **prov: Any) -> None:
    """Write the predictor's files as the folder `folder`: staged whole and switched in, so
    a reader (or a kill) finds the predictor there before or this one, never a mix."""
    with output_set() as tx:
        stage = tx.folder(folder, SIGNATURE)
        kinds = {}
        for kind, km in model.modules.kinds.items():
            write_text(stage / f"{kind}.time.txt", km.time_booster.model_to_string())
            write_text(stage / f"{kind}.power.txt", km.power_booster.model_to_string())
            kinds[kind] = {"mean": km.mean.tolist(), "std": km.std.tolist(),
                           "train_z": km.train_z.round(5).tolist(),
                           "oor_threshold": km.oor_threshold}
        _save_document(model, stage, kinds, **prov)


def _save_document(model: LearnedModel, folder: Path, kinds: dict, **prov: Any) -> None:
    c = model.collectives
    write_json(folder / SIGNATURE, SCHEMA, SCHEMA_VERSION, {
        "gpu": model.gpu.name, "features": list(FEATURES), "kinds": kinds,
        "comm": {"table": _curves(c.table), "waits": _curves(c.waits),
                 "power": _curves(c.power)},
        "terms": model.host.to_dict(),
        "combiner": {"features": list(ALPHA_FEATURES), "W": model.combiner.w.tolist(),
                     "b": model.combiner.b, "tau": model.combiner.tau},
        "intervals": {"energy_log": model.intervals, "time_log": model.time_intervals,
                      "basis": model.interval_basis},
        "meta": model.meta}, **prov)


def _forest(path: Path):
    """A module model's LightGBM text; one that is not whole is one error naming it."""
    from piep.core.errors import ArtifactError
    from piep.predict.gbdt import Forest
    try:
        return Forest(read_text(path))
    except (ValueError, KeyError) as exc:
        raise ArtifactError(f"{path}: not a LightGBM model piep reads ({exc or 'empty'}); "
                            f"refit it (piep train) or remove its folder") from None


def load(folder: Path, gpu: GPU) -> LearnedModel:
    """The predictor in `folder`; its module models evaluated by `piep.predict.gbdt` (the
    same numbers as LightGBM's, without importing it)."""
    doc = read_json(folder / "predictor.json", SCHEMA)
    kinds = {}
    for kind, k in doc["kinds"].items():
        kinds[kind] = KindModel(
            _forest(folder / f"{kind}.time.txt"), _forest(folder / f"{kind}.power.txt"),
            np.asarray(k["mean"]), np.asarray(k["std"]), np.asarray(k["train_z"]),
            float(k["oor_threshold"]))
    comm = doc["comm"]
    collectives = Collectives(_uncurves(comm["table"]), _uncurves(comm["waits"]),
                              _uncurves(comm.get("power", {})))
    comb = doc["combiner"]
    return LearnedModel(gpu, ModuleModels(kinds), collectives, HostTerms(**doc["terms"]),
                        Combiner(np.asarray(comb["W"], dtype=float), float(comb["b"]),
                                 float(comb.get("tau", 2.5))),
                        intervals=doc["intervals"]["energy_log"],
                        time_intervals=doc["intervals"]["time_log"],
                        interval_basis=doc["intervals"].get("basis", {}), meta=doc.get("meta", {}))


def predictor_dir(gpu: str) -> Path:
    """Where the shipped predictor of `gpu` lives (what `piep train` fits)."""
    from piep.core.artifacts import calibration_dir
    return calibration_dir(gpu) / "predictor"


def user_predictor_dir(gpu: str) -> Path:
    """Where a user's refit of `gpu`'s predictor goes (`piep train --from-measurements`);
    it takes precedence over the shipped one."""
    from piep.core.artifacts import user_gpu_dir
    return user_gpu_dir(gpu) / "predictor"


def answering_predictor_dir(gpu: str) -> Path | None:
    """The folder of the predictor that answers for `gpu`: the user's refit, else the
    shipped one; None while neither exists."""
    from piep.core.artifacts import fitted
    path = fitted(gpu, "predictor", "predictor.json")
    return None if path is None else path.parent


def load_learned(gpu: str) -> LearnedModel | None:
    """The learned predictor that answers for `gpu` (the user's refit, else the shipped
    one), or None while none is trained."""
    folder = answering_predictor_dir(gpu)
    return None if folder is None else _load_learned(gpu, str(folder))


@lru_cache(maxsize=4)
def _load_learned(gpu: str, folder: str) -> LearnedModel | None:
    from piep.core.gpus import load_gpu
    model = load(Path(folder), load_gpu(gpu))
    if Path(folder) == user_predictor_dir(gpu):
        model.name = "learned (your refit)"
    return model


load_learned.cache_clear = _load_learned.cache_clear  # after a fit writes a predictor

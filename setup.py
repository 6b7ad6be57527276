"""Build hook: the wheel carries what piep needs at run time from the repository's data
folders (shipped model configs, the GPU profiles, trained predictors, frequency models,
engine profiles, spec sheets) under piep/_data/, so an installed piep predicts without a
checkout. Training data (raw measurements, samples, logs) stays in the repository."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
RUNTIME = ("model_trees/*/config.json", "model_trees/*/source.json", "model_trees/public/*.json",
           "calibration/spec_sheets.json", "calibration/*/gpu.json",
           "calibration/*/predictor/*", "calibration/*/dvfs/freq_model.json",
           "calibration/public/engines/*/*.json",
           "calibration/*/dvfs/literature.csv", "calibration/*/engines/*/profile.json")


class BuildWithData(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "piep" / "_data"
        for pattern in RUNTIME:
            for src in sorted(ROOT.glob(pattern)):
                dst = target / src.relative_to(ROOT)
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)


setup(cmdclass={"build_py": BuildWithData})

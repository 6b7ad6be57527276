"""The CPU core must import and predict with torch and pynvml unavailable."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.pure

BLOCKER = r"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'pynvml', 'transformers'):
            raise ImportError(f'blocked: {name}')
sys.meta_path.insert(0, Block())
import piep.cli, piep.api, piep.tree, piep.predict.pricing, piep.predict.roofline, piep.sweep
import piep.core.layout, piep.core.models, piep.core.artifacts, piep.device
assert piep.device.list_gpus() == []
code = piep.cli.main(['predict', '--model', 'llama-2-7b', '--tp', '2', '--json'])
assert code == 0
assert not any(m.split('.')[0] in ('torch', 'pynvml') for m in sys.modules)
"""


def test_core_imports_without_torch_and_pynvml():
    proc = subprocess.run([sys.executable, "-c", BLOCKER], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert '"schema": "piep.prediction"' in proc.stdout

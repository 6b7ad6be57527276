import os
import tempfile

# one intra-op thread for torch, numpy and LightGBM in the tests and the processes they
# start: the tests' tensors are tiny, and spinning helper threads only compete for the cores
os.environ.setdefault("OMP_NUM_THREADS", "1")
# what users fit (predictor refits, engine profiles) goes to a folder of the test session's
# own: no test writes into the real user data directory or reads a refit found there
os.environ["PIEP_DATA_DIR"] = tempfile.mkdtemp(prefix="piep-test-data-")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from piep.core.config import Parallel, Workload  # noqa: E402
from piep.core.gpus import load_gpu  # noqa: E402
from piep.core.layout import validate  # noqa: E402
from piep.core.models import load_model  # noqa: E402

# property tests draw the same examples on every run and never time out or fail a health
# check on a loaded machine: what they find does not depend on the machine's speed
settings.register_profile("piep", derandomize=True, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("piep")


@pytest.fixture
def h200():
    return load_gpu("h200")


@pytest.fixture
def make_dep(h200):
    def make(model, *, tp=1, pp=1, dp=1, batch=1, prompt_len=512, gen_len=128, mode="graph",
             check_memory=True, engine=None):
        return validate(load_model(model), Parallel(tp=tp, pp=pp, dp=dp),
                        Workload(batch=batch, prompt_len=prompt_len, gen_len=gen_len, mode=mode),
                        h200, check_memory=check_memory, engine=engine)
    return make

import pytest

from piep.config import Parallel, Workload
from piep.gpus import load_gpu
from piep.layout import validate
from piep.models import load_model


@pytest.fixture
def h200():
    return load_gpu("h200")


@pytest.fixture
def make_dep(h200):
    def make(model, *, tp=1, pp=1, dp=1, batch=1, prompt_len=512, gen_len=128, mode="graph",
             check_memory=True):
        return validate(load_model(model), Parallel(tp=tp, pp=pp, dp=dp),
                        Workload(batch=batch, prompt_len=prompt_len, gen_len=gen_len, mode=mode),
                        h200, check_memory=check_memory)
    return make

"""The lab's campaigns are data (calibration/h200/designs/): the design functions rebuild
every committed design, trace and config from them, and every shape a campaign names is
known."""

import json

import pytest

from piep.sampling import design
from piep.core.trace import poisson_trace
from _paths import ROOT  # noqa: E402

pytestmark = pytest.mark.replay

ENGINES = ROOT / "calibration/h200/engines"


@pytest.mark.parametrize("name", sorted({**design.listed_runs(), **design.engine_designs()}))
def test_every_committed_engine_design_is_rebuilt_from_the_campaign_files(name):
    path = ENGINES / name
    if not path.exists():
        pytest.skip(f"{name} was never written (a design for a machine not lent)")
    listed = design.listed_runs()
    rows = design.build_replicates(*listed[name]) if name in listed else \
        design.build_engine_design(**design.engine_designs()[name])
    assert rows == [json.loads(line) for line in path.read_text().splitlines() if line]


def test_every_trace_and_config_of_the_serving_campaign_is_rebuilt():
    serving = design.campaign("serving")
    for name, entry in serving["traces"].items():
        kw = {k: v for k, v in entry.items() if k not in ("set", "why")}
        assert poisson_trace(**kw).to_jsonl() == (ENGINES / "hf-cb/traces" / name).read_text()
    shapes = design.shapes()
    for name in serving["unlisted_shapes"]:
        committed = json.loads((ENGINES / "hf-cb/configs" / f"{name}.json").read_text())
        assert committed == shapes[name]


def test_every_shape_a_campaign_names_is_known_and_every_entry_says_why():
    names = {m for _, runs in design.listed_runs().values() for m, *_ in runs}
    names |= {m for kw in design.engine_designs().values() for m in kw["models"]}
    for name in sorted(names):
        spec, _ = design.named_spec(name)
        assert spec.name == name
    engines = design.campaign("engines")
    assert all(e["why"] for part in ("drawn", "listed") for e in engines[part].values())
    assert all(e["why"] for e in design.campaign("shapes")["shapes"].values())

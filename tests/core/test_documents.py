"""piep's documents: every committed artifact reads against its registered schema, every
schema round-trips through the one writer, and `predict --json` keeps its golden keys,
types and numbers."""

import contextlib
import io
import json
import math
import os
from pathlib import Path

import pytest

from piep.core.artifacts import SCHEMAS, check_document, read_json, write_json
from piep.cli import main
from piep.core.errors import ArtifactError
from _paths import ROOT, DATA  # noqa: E402

pytestmark = pytest.mark.replay

GOLDEN = DATA / "predict_golden.json"
GOLDEN_ARGS = ["predict", "--model", "llama-2-7b", "--gpu", "h200", "--tp", "2", "--batch", "16",
               "--prompt-len", "512", "--gen-len", "128", "--json"]


def _cli(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return json.loads(out.getvalue())


def _committed():
    for path in sorted((ROOT / "calibration").rglob("*.json")) + \
            sorted((ROOT / "reports").rglob("*.json")):
        doc = json.loads(path.read_text())
        if isinstance(doc, dict) and str(doc.get("schema", "")).startswith("piep."):
            yield path, doc
    for path in sorted((ROOT / "calibration").rglob("*.jsonl")):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            doc = json.loads(line) if line.strip() else None
            if isinstance(doc, dict) and str(doc.get("schema", "")).startswith("piep."):
                yield Path(f"{path}:{i}"), doc


def test_every_committed_artifact_reads_against_its_schema():
    seen = set()
    for path, doc in _committed():
        check_document(doc, str(path))
        seen.add(doc["schema"])
    assert {"piep.measurement", "piep.module_sample", "piep.learned_predictor",
            "piep.engine_profile", "piep.freq_model", "piep.clock_plan"} <= seen


@pytest.mark.parametrize("argv", [
    GOLDEN_ARGS,
    ["compare", "llama-2-7b@tp2", "llama-2-13b", "--json"],
    ["sweep", "--model", "llama-2-7b", "--batch", "1", "4", "--json"],
    ["plan", "--model", "llama-2-7b", "--json"],
    ["optimize", "--model", "llama-2-7b", "--batches", "1,4", "--json"],
    ["env", "--json"],
    ["tree", "llama-2-7b", "--json"],
    ["serve", "--model", "llama-3-8b", "--rate", "4", "--requests", "20", "--json"],
    ["steady", "--model", "llama-3-8b", "--max-num-seqs", "8", "--json"],
], ids=lambda a: a[0])
def test_command_documents_round_trip_through_the_writer(argv, tmp_path):
    doc = _cli(argv)
    check_document(doc, argv[0])
    body = {k: v for k, v in doc.items() if k not in ("schema", "schema_version", "provenance")}
    path = write_json(tmp_path / "doc.json", doc["schema"], doc["schema_version"], body,
                      command=" ".join(argv))
    back = read_json(path, doc["schema"])
    assert {k: v for k, v in back.items() if k != "provenance"} == \
        {k: v for k, v in doc.items() if k != "provenance"}
    assert back["provenance"]["command"] == " ".join(argv)


def test_every_schema_is_exercised_somewhere():
    """A registered schema is written by piep or found in the committed data."""
    committed = {doc["schema"] for _, doc in _committed()}
    written = {"piep.prediction", "piep.comparison", "piep.sweep", "piep.clock_plan",
               "piep.optimize", "piep.env", "piep.model_tree", "piep.measurement_failure",
               "piep.serving", "piep.scenario", "piep.gpu_calibration",
               "piep.module_failure", "piep.steady_state", "piep.power_curves"}
    assert set(SCHEMAS) <= committed | written


def test_a_broken_document_is_one_clear_error(tmp_path):
    doc = _cli(GOLDEN_ARGS)
    doc["energy_j"] = "a lot"
    with pytest.raises(ArtifactError, match="'energy_j' is str, not int or float"):
        check_document(doc, "x.json")
    del doc["energy_j"]
    with pytest.raises(ArtifactError, match="without 'energy_j'"):
        check_document(doc, "x.json")
    with pytest.raises(ArtifactError, match="not a piep schema"):
        check_document({"schema": "other"}, "y.json")
    (tmp_path / "new.json").write_text(json.dumps({**_cli(GOLDEN_ARGS), "schema_version": 9}))
    with pytest.raises(ArtifactError, match="newer than this piep reads"):
        read_json(tmp_path / "new.json", "piep.prediction")


def _same(a, b, path=""):
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{path}: keys {set(a) ^ set(b)}"
        for k in a:
            _same(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{path}: length"
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert type(a) is type(b) or {type(a), type(b)} <= {int, float}, path
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), f"{path}: {a} vs {b}"
    else:
        assert type(a) is type(b) and a == b, f"{path}: {a!r} vs {b!r}"


def test_predict_json_is_the_golden_document():
    """Every key, type and number of `piep predict --json` for the README's example.
    A change of the predictor that is meant: PIEP_UPDATE_GOLDEN=1 pytest this test."""
    doc = {k: v for k, v in _cli(GOLDEN_ARGS).items() if k != "provenance"}
    if os.environ.get("PIEP_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(doc, indent=1) + "\n")
    _same(json.loads(GOLDEN.read_text()), doc)


def test_the_shipped_json_schemas_are_the_registry_and_every_document_meets_them(tmp_path):
    """piep/schemas/*.schema.json (JSON Schema 2020-12) are what the registry makes now
    (`python benchmarks/docs.py --write`), and every committed document and every command's
    document validates against its kind's."""
    jsonschema = pytest.importorskip("jsonschema")
    from piep.core.artifacts import schema_files
    folder = ROOT / "piep" / "schemas"
    made = schema_files()
    shipped = {p.name: p.read_text() for p in folder.glob("*.schema.json")}
    assert shipped == made, "regenerate: python benchmarks/docs.py --write"
    validators = {json.loads(text)["title"]: jsonschema.Draft202012Validator(json.loads(text))
                  for text in made.values()}
    seen = set()
    for path, doc in _committed():
        errors = list(validators[doc["schema"]].iter_errors(doc))
        assert not errors, f"{path}: {errors[0].message}"
        seen.add(doc["schema"])
    for argv in (["predict", "--model", "llama-2-7b", "--json"],
                 ["serve", "--model", "llama-3-8b", "--rate", "4", "--requests", "10",
                  "--json"],
                 ["steady", "--model", "llama-3-8b", "--max-num-seqs", "8", "--json"],
                 ["plan", "--model", "llama-2-7b", "--power-curves", "100", "--json"],
                 ["serve", "--model", "llama-3-8b", "--engine", "vllm", "--gpu", "h100",
                  "--rate", "4", "--requests", "10", "--json"]):
        doc = _cli(argv)
        assert not list(validators[doc["schema"]].iter_errors(doc)), argv
        seen.add(doc["schema"])
    assert len(seen) >= 10
    # a document the schema refuses: a wrong type, and a newer version than piep reads
    bad = {**_cli(["predict", "--model", "llama-2-7b", "--json"]), "energy_j": "many"}
    assert list(validators["piep.prediction"].iter_errors(bad))
    assert list(validators["piep.prediction"].iter_errors({**bad, "energy_j": 1.0,
                                                            "schema_version": 99}))

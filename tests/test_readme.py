"""The README is for users: short, with real sample output; every figure in it is what
its report states now (benchmarks/docs.py makes them), the generated docs are current,
and every link leads somewhere."""

import re
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.replay

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import docs  # noqa: E402  (benchmarks/docs.py)


def test_the_readme_is_short_and_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    fence = text.index("```bash")
    block = text[fence:text.index("```", fence + 3)]
    assert "pip install -e . && piep predict" in block
    assert 'python -m pytest -q -m "not gpu and not slow"' in block


@pytest.mark.slow  # (seconds: the default tier's budget, reports/speed.md)
def test_every_generated_part_is_what_the_script_makes_now():
    """A figure in the README that differs from its report (or sample output that differs
    from piep's output) fails here: run `python benchmarks/docs.py --write`."""
    made = docs.blocks()
    texts = {name: (ROOT / name).read_text() for name in docs.BLOCK_FILES}
    assert set(m.group(1) for t in texts.values() for m in docs.MARK.finditer(t)) == set(made)
    for name, text in texts.items():
        assert docs.stale(text, made) == [], name
    for name, make in docs.GENERATED_DOCS.items():
        assert (ROOT / name).read_text() == make(), name


def test_every_link_leads_somewhere():
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#]+)\)", path.read_text()):
            if target.startswith("http"):
                continue
            assert (path.parent / target).exists(), f"{path.name}: {target}"


def test_the_coverage_table_in_the_accuracy_report_is_current():
    import interval_coverage
    assert interval_coverage.table() in (ROOT / "reports" / "accuracy.md").read_text()


# a figure with a unit: what goes stale when a refit or a change moves it
FIGURE = re.compile(r"(?<![\w.])[-+]?\d[\d,.]*\s?(%|W\b|us\b|µs|ms\b|x\b|J\b|TB/s|GB|GiB|"
                    r"MHz|s\b)")


def test_docs_state_no_figure_by_hand():
    """Every figure in docs/ comes from a generated block (a report, a profile, the
    program's own output): docs once quoted plan savings, fitted host times and powers that
    later fits changed. Outside the blocks only code and `literals` may hold figures, and
    the interval level ("90 %")."""
    for path in sorted((ROOT / "docs").glob("*.md")):
        if str(path.relative_to(ROOT)) in docs.GENERATED_DOCS:
            continue
        text = docs.MARK.sub("", path.read_text())
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        text = re.sub(r"`[^`\n]*`", "", text)
        by_hand = [m.group(0) for m in FIGURE.finditer(text) if m.group(0) != "90 %"]
        assert not by_hand, f"{path.name}: {by_hand[:5]}: generate them (benchmarks/docs.py)"

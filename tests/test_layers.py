"""Layers point down: every import in piep (also inside functions) goes to its own layer or
a lower one, the subpackages import each other without cycles, only the command line
imports piep.commands, and only piep.device imports pynvml."""

import ast
from collections import defaultdict
from pathlib import Path

import pytest

from piep import CORE_FLOORS, FLOORS

pytestmark = pytest.mark.pure

PIEP = Path(__file__).resolve().parent.parent / "piep"
# top-level modules and subpackages of piep by layer (0 lowest): piep.FLOORS
LAYERS = FLOORS
LEVEL = {unit: level for level, units in LAYERS.items() for unit in units}


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


_PARSED: list = []  # every file of piep with its syntax tree, read once per session


def _parsed() -> list:
    """(path, syntax tree) of every file of piep."""
    if not _PARSED:
        _PARSED.extend((path, ast.parse(path.read_text()))
                       for path in sorted(PIEP.rglob("*.py")))
    return _PARSED


def _imports():
    """(importing file, its unit, imported module) for every import statement."""
    for path, tree in _parsed():
        rel = path.relative_to(PIEP.parent).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [f"piep.{a.name}" if node.module == "piep" else node.module
                         for a in node.names]
            else:
                continue
            for name in names:
                yield path.relative_to(PIEP.parent), _unit(module), name


def _piep_edges():
    for path, src, name in _imports():
        if name == "piep" or name.startswith("piep."):
            dst = _unit(name) if name.startswith("piep.") else "__init__"
            if dst == "__version__":
                dst = "__init__"
            if dst != src:
                yield path, src, dst


CORE_LAYERS = CORE_FLOORS
CORE_LEVEL = {m: level for level, mods in CORE_LAYERS.items() for m in mods}


def test_the_core_imports_only_itself_and_down():
    """The core is the floor: it imports no wing, and its own modules point down."""
    core = PIEP / "core"
    mods = {p.stem for p in core.glob("*.py")} - {"__init__"}
    assert mods == set(CORE_LEVEL), f"give these a core layer: {sorted(mods ^ set(CORE_LEVEL))}"
    bad = []
    for path, src, name in _imports():
        if src != "core" or path.stem == "__init__" or not name.startswith("piep"):
            continue
        parts = name.split(".")
        if name == "piep.__version__" or parts[:2] == ["piep", "__version__"]:
            continue
        if parts[1] != "core":
            bad.append(f"{path} imports {name} (a wing)")
        elif len(parts) > 2 and CORE_LEVEL[parts[2]] >= CORE_LEVEL[path.stem] \
                and parts[2] != path.stem:
            bad.append(f"{path} imports {name} (not below it)")
    assert not bad, "\n".join(bad)


def test_every_unit_has_a_layer():
    units = {p.stem if p.is_file() else p.name for p in PIEP.iterdir()
             if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))}
    assert units <= set(LEVEL), f"give these a layer in LAYERS: {sorted(units - set(LEVEL))}"


def test_imports_point_down():
    upward = [f"{path}: {src} (layer {LEVEL[src]}) imports {dst} (layer {LEVEL[dst]})"
              for path, src, dst in _piep_edges() if LEVEL[dst] > LEVEL[src]]
    assert not upward, "\n".join(upward)


def _no_cycle(graph: dict[str, set[str]]) -> None:
    """Fails naming the first import cycle of `graph` (node -> the nodes it imports)."""
    state: dict[str, int] = {}

    def visit(u, stack):
        state[u] = 1
        for v in sorted(graph[u]):
            if state.get(v) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack + [u, v]))
            if v not in state:
                visit(v, stack + [u])
        state[u] = 2
    for u in sorted(graph):
        if u not in state:
            visit(u, [])


def test_no_cycle_between_subpackages():
    graph = defaultdict(set)
    for _, src, dst in _piep_edges():
        graph[src].add(dst)
    _no_cycle(graph)


def test_only_the_command_line_imports_commands():
    bad = [f"{path}: {src}" for path, src, dst in _piep_edges()
           if dst == "commands" and src not in ("cli", "commands")]
    assert not bad, bad


def test_pynvml_only_in_the_device_seam():
    bad = [str(path) for path, _, name in _imports()
           if name.split(".")[0] == "pynvml" and path.parts[1] != "device"]
    assert not bad, bad


# the campaign designs (data: which runs each measurement campaign made) and the harness of
# transformers' continuous batching (that engine's own measurement) name engines as data
# (bench_results reads the result files of vLLM's and SGLang's benchmarks: a format's name)
NAMES_ENGINES = ("piep/core/engines.py", "piep/sampling/design.py", "piep/sampling/hf_cb.py",
                 "piep/sampling/bench_results.py")


def test_only_the_registry_names_an_engine():
    """Engine facts live in one record each (piep/core/engines.py): code asks a record what it
    needs (`engine(name).kind`, `names(host_fitted=True)`), it does not compare names."""
    from piep.core.engines import ENGINES
    found = [f"{path.relative_to(PIEP.parent)}:{node.lineno} {node.value!r}"
             for path, tree in _parsed()
             if str(path.relative_to(PIEP.parent)) not in NAMES_ENGINES
             for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and node.value in ENGINES]
    assert not found, found


def test_the_check_sees_imports_inside_functions():
    """The walker reads function bodies: the CLI's commands are imported lazily there."""
    lazy = [(p, n) for p, src, n in _imports() if src == "commands" and n == "piep.api"]
    assert lazy


# the lab's design functions estimate a run's time with the roofline (so that a design fits
# the device budget); committed device scripts run them as `python -m piep.sampling.design`
LAB_READS_THE_PREDICTOR = ("piep/sampling/design.py",)


def test_the_roles_of_lab_fitting_and_prediction():
    """The predictor never imports fitting; fitting never imports the lab; the lab never
    imports fitting, the simulator or the answers (and the predictor only to size its
    designs); only the command line imports fitting."""
    edges = [(str(path), src, dst) for path, src, dst in _piep_edges()]
    assert not [e for e in edges if e[1] == "predict" and e[2] == "fit"]
    assert not [e for e in edges if e[1] == "fit" and e[2] == "sampling"]
    assert not [e for e in edges if e[1] == "sampling"
                and (e[2] in ("fit", "serving", "resolve", "api")
                     or (e[2] == "predict" and e[0] not in LAB_READS_THE_PREDICTOR))]
    assert not [e for e in edges if e[2] == "fit" and e[1] not in ("fit", "commands")]


def test_no_cycle_between_modules():
    """No two modules import each other, even lazily inside a function (a circle the
    layers cannot see: two modules of one wing)."""
    modules = {".".join(p.relative_to(PIEP.parent).with_suffix("").parts)
               .removesuffix(".__init__") for p, _ in _parsed()}
    graph = defaultdict(set)
    for path, _, name in _imports():
        src = ".".join(path.with_suffix("").parts).removesuffix(".__init__")
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name not in (src, "piep"):
            graph[src].add(name)
    _no_cycle(graph)


TIERS = ("pure", "fake_device", "replay", "gloo", "gpu")


def test_every_test_file_names_its_tier():
    """Each test file says its tier (`pytestmark`), not a table elsewhere."""
    tests = Path(__file__).resolve().parent
    untiered = [p.name for p in sorted(tests.rglob("test_*.py"))
                if not any(f"pytest.mark.{t}" in line for line in p.read_text().splitlines()
                           if line.startswith(("pytestmark", " ")) for t in TIERS)]
    assert not untiered, untiered


def test_tests_mirror_the_wings():
    """A test folder is named for the wing of piep it tests (piep/<wing>/)."""
    tests = Path(__file__).resolve().parent
    wings = {p.name for p in PIEP.iterdir() if (p / "__init__.py").is_file()}
    folders = {p.parent.name for p in tests.rglob("test_*.py") if p.parent != tests}
    assert folders and folders <= wings, sorted(folders - wings)


def test_no_cache_is_keyed_by_an_address():
    """No `id()` in piep: an object's address is reused once it is freed, so a cache keyed
    by it can answer for another object; a cache keys by value, or by the object itself
    where its class hashes by identity (`@dataclass(eq=False)`)."""
    found = [f"{path.relative_to(PIEP.parent)}:{node.lineno}"
             for path, tree in _parsed() for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
             and node.func.id == "id"]
    assert not found, found


def test_a_walk_follows_a_value_and_what_is_made_of_it(tmp_path, monkeypatch):
    """benchmarks/walks.py: a file counts when one of its functions gets the parameter,
    something built from it or returned from a call given it, not when it only runs."""
    import sys
    sys.path.insert(0, str(PIEP.parent / "benchmarks"))
    import walks
    pkg = tmp_path / "piep"
    pkg.mkdir()
    (pkg / "a.py").write_text("def double(x):\n    return [x, x]\n")
    (pkg / "b.py").write_text("class Box:\n    def __init__(self, v):\n        self.v = v\n")
    (pkg / "c.py").write_text("def size(box):\n    return 3\n")
    (pkg / "d.py").write_text("def other(y):\n    return y\n")
    # a lookup given the value returns a record that was there before: not derived
    (pkg / "e.py").write_text("TABLE = {2.5: [1.0]}\ndef look(k):\n    return TABLE[k]\n"
                              "def sum_of(r):\n    return sum(r)\n")
    monkeypatch.setattr(walks, "PIEP", str(pkg) + "/")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("a", "b", "c", "d", "e"):
        sys.modules.pop(f"piep_walk_{name}", None)
    import importlib.util

    def load(name):
        spec = importlib.util.spec_from_file_location(f"piep_walk_{name}", pkg / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    a, b, c, d, e = (load(n) for n in "abcde")
    seed = 2.5

    def run():
        pair = a.double(seed)   # entered with the value; its result carries it
        box = b.Box(pair)       # built from the result: carries it
        c.size(box)             # entered with what holds it
        d.other(7.25)           # runs, but not with the value
        e.sum_of(e.look(seed))  # e.py entered (look), but the record it returns was there
    assert sorted(walks.follow(run, seed)) == ["a.py", "b.py", "c.py", "e.py"]
    assert walks.follow(lambda: d.other(e.look(seed)), seed) == {"e.py": 1}

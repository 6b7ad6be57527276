"""The one place that reads and writes piep's files.

Every file carries `schema`, `schema_version` and provenance, and is written
atomically (temporary file in the same folder, then rename).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import os
import platform
import re
import stat
import sys
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable

from piep import __version__

from piep.core import outputs
from piep.core.errors import ArtifactError, OutputError

log = logging.getLogger("piep.artifacts")

PACKAGE = Path(__file__).resolve().parent.parent  # piep/
REPO_ROOT = PACKAGE.parent


def data_root() -> Path:
    """Folder holding model_trees/ and calibration/: $PIEP_HOME, else the checkout piep
    runs from, else the data an installed wheel carries (piep/_data)."""
    return _root(os.environ.get("PIEP_HOME"))


@lru_cache(maxsize=8)
def _root(home: str | None) -> Path:
    if home:
        return Path(home)
    if (REPO_ROOT / "calibration").is_dir():
        return REPO_ROOT
    return PACKAGE / "_data"


def model_trees_dir() -> Path:
    return _trees(data_root())


@lru_cache(maxsize=8)
def _trees(root: Path) -> Path:
    return root / "model_trees"


def gpu_key(name: str) -> str:
    """A GPU's name as the folders of its calibration and fits are named: lower case,
    letters, digits, '.', '-', '_' (a name that would reach outside those folders, such
    as '../x', is refused); nvidia-smi's form of a name ('NVIDIA H100 80GB HBM3') in
    the same way ('h100-80gb-hbm3')."""
    key = re.sub(r"\s+", "-", re.sub(r"^nvidia[\s-]+", "", str(name).strip().lower()))
    if not USER_NAME.fullmatch(key):
        from piep.core.errors import ConfigError
        raise ConfigError(f"--gpu {name!r}: a GPU is named in letters, digits, '.', '-' and "
                          f"'_' (e.g. h200, h100-sxm)")
    return key


def calibration_dir(gpu: str) -> Path:
    """A GPU's calibration: the shipped one, else one of the user's own (`piep calibrate
    gpu --name`, in the user data directory)."""
    gpu = gpu_key(gpu)
    shipped = data_root() / "calibration" / gpu
    if not shipped.is_dir() and user_calibration_dir(gpu).is_dir():
        return user_calibration_dir(gpu)
    return shipped


def user_calibration_dir(gpu: str) -> Path:
    """Where `piep calibrate gpu --name GPU` writes the calibration of a GPU of the user's."""
    return user_data_dir() / "calibration" / gpu_key(gpu)


def user_gpu_dir(gpu: str) -> Path:
    """Where a user's own fits for `gpu` go (its predictor, engines, frequency model)."""
    return user_data_dir() / gpu_key(gpu)


# a name of the user's own that names a folder of the user data directory (an engine, a GPU)
USER_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def user_data_dir() -> Path:
    """Where piep writes what users fit ($PIEP_DATA_DIR, else XDG data home)."""
    if os.environ.get("PIEP_DATA_DIR"):
        return Path(os.environ["PIEP_DATA_DIR"])
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "piep"


def fitted(gpu: str, *parts: str) -> Path | None:
    """A fitted artifact of `gpu` (`parts` under its folder: a predictor's predictor.json,
    an engine's profile.json, the frequency model): the user's own fit where there is one
    (the user data directory), else the shipped one (calibration/<gpu>/); None where
    neither exists. Every fitted artifact a prediction reads is looked up here."""
    for root in (user_gpu_dir(gpu), calibration_dir(gpu)):
        path = root.joinpath(*parts)
        if path.is_file():
            return path
    return None


def git_hash() -> str | None:
    """The commit of this code; $PIEP_GIT_COMMIT where the copy has no .git (device runs)."""
    if os.environ.get("PIEP_GIT_COMMIT"):
        return os.environ["PIEP_GIT_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def provenance(**extra: Any) -> dict[str, Any]:
    return {"piep_version": __version__, "git": git_hash(), "python": platform.python_version(),
            "host": platform.node(), **extra}


def _kind_of(path: Path) -> str | None:
    """What stands at `path` where it is not a regular file or a folder ("a FIFO", ...),
    following symlinks; None for a regular file, a folder or nothing."""
    try:
        mode = path.stat().st_mode
    except OSError:  # nothing there, or a dangling symlink (written through to its target)
        return None
    for test, kind in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return None


def writable(path: Path | str, what: str = "output", *, claim: bool = True) -> Path:
    """Check, before any long work, that `path` can be written (a file, not a folder; its
    folder creatable) and, with `claim`, claim it (a second piep writing it is refused; a
    file appended to is not claimed: appends of several processes interleave by whole
    lines); one clear error otherwise. What stands there and is not a regular file (a
    device, a FIFO, a socket) is refused, never replaced."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{what} {path} is a folder; give a file path")
    kind = _kind_of(path)
    if kind:
        raise OutputError(f"{what} {path} is {kind}, not a regular file; piep writes only "
                          f"regular files (give a file path)")
    _check_parents(path)
    if claim:
        outputs.claim(path)
    return path


def _check_parents(path: Path) -> None:
    parent = path.parent
    for up in [parent, *parent.parents]:
        if up.exists():
            if not up.is_dir():
                raise OutputError(f"cannot write {path}: {up} is {_kind_of(up) or 'a file'}, "
                                  f"not a folder")
            if not os.access(up, os.W_OK):
                raise OutputError(f"cannot write {path}: {up} is not writable")
            break


def writable_folder(path: Path | str, what: str, signature: str) -> Path:
    """Check, before any long work, that the folder `path` can be written whole (absent,
    empty, or an earlier output of the same command: it holds `signature`, a regular
    file, and nothing that is not a file or folder) and claim it."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{what} {path} is {_kind_of(path) or 'a file'}; give a folder")
    if path.is_dir():
        for entry in sorted(path.iterdir()):
            kind = _kind_of(entry)
            if kind:
                raise OutputError(f"{what} {path}: {entry.name} is {kind}, not a regular "
                                  f"file; piep replaces only regular files and folders")
        outputs.check_folder(path, signature, what)
    _check_parents(path / signature)
    outputs.claim(path)
    return path


def figure_path(path: Path | str) -> Path:
    """A figure file to write: a format matplotlib writes, in a writable place."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    path = Path(path)
    formats = Figure().canvas.get_supported_filetypes()
    if path.suffix.lstrip(".").lower() not in formats:
        raise OutputError(f"figure {path}: give a file ending in one of "
                          f"{', '.join('.' + f for f in sorted(formats))}")
    return writable(path, "figure")


def _open_for_write(path: Path, mode: str):
    """The one place files are opened for writing (tests inject faults here): a new file,
    never one that exists nor through a symlink; or, to append, the file as it is."""
    return open(path, mode) if "a" in mode else outputs.create_new(path, mode)


def journal_dir() -> Path:
    """Where commits of several outputs keep their journal while they rename."""
    return user_data_dir() / "journal"


def recover_outputs() -> None:
    """Complete the commits of outputs that killed runs left halfway (`piep.core.outputs`)."""
    outputs.recover(journal_dir())


@contextlib.contextmanager
def output_set():
    """Outputs written together (`Outputs.folder`, `Outputs.file`: staged names to write
    into), all of them put in place at the end or, if anything fails, none: what was there
    before stays."""
    tx = outputs.Outputs(journal=journal_dir())
    try:
        yield tx
        tx.commit()
    except BaseException as exc:
        tx.abort()
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write {exc.filename or 'an output'}: "
                              f"{exc.strerror or exc}") from None
        raise


def _atomic_write(path: Path, content: str | bytes) -> None:
    """Temporary file in the same folder, flushed to the disk, then renamed; mode 0666 &
    ~umask, as open(). A symlink is written through: its target is replaced, the link
    stays."""
    path = writable(path)
    try:
        outputs.write_file(path, content, opener=lambda p, m: _open_for_write(p, m))
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def save_figure(fig, path: Path | str, dpi: int = 100) -> Path:
    """A matplotlib figure rendered in memory, then written atomically like any artifact."""
    buf = io.BytesIO()
    fig.savefig(buf, format=Path(path).suffix.lstrip(".").lower() or "png", dpi=dpi)
    _atomic_write(Path(path), buf.getvalue())
    return Path(path)


# a list at least this long (a row per request of a stream, per configuration of a sweep)
# is written one compact row per line
LONG_LIST = 1_000


def json_text(doc: Any) -> str:
    """`doc` as indented JSON, except that each list of at least LONG_LIST items has one
    compact item per line: the same document, and Python's C encoder writes those rows
    (an indented dump runs its pure-Python encoder over every row: 1.6 s for a stream of
    100,000 requests)."""
    long_lists: dict[str, list] = {}
    mark = f"piep-long-list-{os.urandom(8).hex()}-"

    def swap(x: Any) -> Any:  # each long list replaced by a marker string
        if isinstance(x, dict):
            return {k: swap(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            if len(x) < LONG_LIST:
                return [swap(v) for v in x]
            key = f"{mark}{len(long_lists)}"
            long_lists[key] = list(x)
            return key
        return x
    text = json.dumps(swap(doc), indent=2)
    for key, rows in long_lists.items():
        at = text.index(f'"{key}"')
        line = text[text.rfind("\n", 0, at) + 1:at]
        lead = " " * (len(line) - len(line.lstrip(" ")))  # the indentation of its key
        body = ",\n".join(f"{lead}  {json.dumps(r)}" for r in rows)
        text = f"{text[:at]}[\n{body}\n{lead}]{text[at + len(key) + 2:]}"
    return text


def write_json(path: Path | str, schema: str, version: int, body: dict[str, Any],
               **prov: Any) -> Path:
    """An enveloped document (schema, version, provenance), checked against its registered
    schema and written atomically."""
    doc = {"schema": schema, "schema_version": version, "provenance": provenance(**prov), **body}
    check_document(doc, str(path))
    _atomic_write(Path(path), json.dumps(doc, indent=2, sort_keys=False) + "\n")
    return Path(path)


def write_text(path: Path | str, text: str) -> Path:
    _atomic_write(Path(path), text)
    return Path(path)


def load_json(path: Path | str) -> Any:
    return parse_json(read_text(path), str(path))


class _NotJSON(ValueError):
    """NaN or Infinity: Python's JSON reader takes them, JSON has no such numbers."""


def _no_constant(name: str):
    raise _NotJSON(name)


def parse_json(text: str, where: str, *, constants: bool | str = False) -> Any:
    """The JSON value of `text`; what is not JSON (NaN and Infinity included, unless
    `constants`: files of tools that write them, as Python's json does; "names": they
    read as the strings "NaN", "Infinity", "-Infinity", which a typed reader refuses
    where it takes a number), nested past Python's recursion limit, or holds an integer
    of more than 4,300 digits is one error naming `where`."""
    parse = str if constants == "names" else None if constants else _no_constant
    try:
        # (a float literal too large for a float reads as infinity: the typed readers
        # check that each number they take is finite)
        return json.loads(text, parse_constant=parse)
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"{where}: not valid JSON ({exc.msg}: line {exc.lineno} column "
                            f"{exc.colno})") from None
    except _NotJSON as exc:
        raise ArtifactError(f"{where}: {exc} is not a JSON number; give a finite number "
                            f"or null") from None
    except RecursionError:
        raise ArtifactError(f"{where}: nested too deeply to be a piep input") from None
    except ValueError:  # an integer past Python's limit on digits
        raise ArtifactError(f"{where}: a number of more than {sys.get_int_max_str_digits():,} "
                            f"digits is no size piep reads") from None


# --- the schemas of piep's documents ---------------------------------------------------
NUM = (int, float)
OPT_NUM = (int, float, type(None))


@dataclass(frozen=True)
class Schema:
    """A document kind: its name, the newest version this piep writes and reads, the
    top-level keys (with their types) every document of the kind has, and those of them
    that are finite and positive where they are numbers (a run's energy and time)."""
    name: str
    version: int
    required: tuple[tuple[str, Any], ...]
    positive: tuple[str, ...] = ()

    def check(self, doc: Any, where: str) -> dict[str, Any]:
        if not isinstance(doc, dict):
            raise ArtifactError(f"{where}: a {self.name} document must be a JSON object")
        if int(doc.get("schema_version", 0)) > self.version:
            raise ArtifactError(f"{where}: schema_version {doc['schema_version']} is newer than "
                                f"this piep reads ({self.version}); upgrade piep")
        for key, kind in self.required:
            if key not in doc:
                raise ArtifactError(f"{where}: {self.name} document without {key!r}")
            if not isinstance(doc[key], kind) or (kind == NUM and isinstance(doc[key], bool)):
                raise ArtifactError(f"{where}: {self.name} {key!r} is "
                                    f"{type(doc[key]).__name__}, not {_type_name(kind)}")
        for key in self.positive:
            value = doc.get(key)
            if isinstance(value, (int, float)) and not (math.isfinite(value) and value > 0):
                raise ArtifactError(f"{where}: {self.name} {key}={value!r} must be a finite "
                                    f"number > 0")
        return doc


    def json_schema(self) -> dict[str, Any]:
        """The kind as a JSON Schema (2020-12): its name and a version this piep reads, the
        keys every document has with their JSON types, the positive numbers; other keys
        are allowed (documents gain keys; a reader keeps to the required ones)."""
        props: dict[str, Any] = {"schema": {"const": self.name},
                                 "schema_version": {"type": "integer", "minimum": 1,
                                                    "maximum": self.version}}
        for key, kind in self.required:
            props[key] = {"type": _json_types(kind)}
            if key in self.positive:
                props[key]["exclusiveMinimum"] = 0
        for key in self.positive:
            props.setdefault(key, {"exclusiveMinimum": 0})
        return {"$schema": "https://json-schema.org/draft/2020-12/schema",
                "$id": f"urn:piep:schema:{self.name}:{self.version}", "title": self.name,
                "type": "object", "required": ["schema", "schema_version",
                                               *(k for k, _ in self.required)],
                "properties": props}


def _json_types(kind) -> list[str] | str:
    """A Python type (or tuple of them) of `Schema.required` as JSON Schema types (an int
    is a JSON number too; a bool is neither)."""
    names = {str: "string", int: "integer", float: "number", dict: "object", list: "array",
             type(None): "null", bool: "boolean"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    out = sorted({names[k] for k in kinds})
    if "number" in out and "integer" in out:
        out.remove("integer")
    return out[0] if len(out) == 1 else out


def schema_files() -> dict[str, str]:
    """Every registered kind's JSON Schema as the text piep ships
    (`piep/schemas/<name>.schema.json`)."""
    return {f"{name}.schema.json": json.dumps(schema.json_schema(), indent=2) + "\n"
            for name, schema in sorted(SCHEMAS.items())}


def _type_name(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join("null" if k is type(None) else k.__name__ for k in kinds)


SCHEMAS: dict[str, Schema] = {}


def register(name: str, version: int, *, positive: tuple[str, ...] = (),
             **required: Any) -> Schema:
    SCHEMAS[name] = Schema(name, version, tuple(required.items()), positive)
    return SCHEMAS[name]


_WORKLOAD = dict(model=str, tp=int, pp=int, dp=int, batch=int, prompt_len=int, gen_len=int,
                 mode=str)
# what a prediction of a batch and a served stream both state, named as piep.core.results names it
_OUTCOME = dict(requests=int, output_tokens=int, energy_j=NUM, time_s=NUM,
                j_per_output_token=NUM, j_per_request=NUM, ttft_s=dict, tpot_s=dict, e2e_s=dict,
                prefill=dict, decode=dict, no_request=dict, breakdown_j=dict, flags=list)
register("piep.prediction", 2, model=str, gpu=str, layout=dict, workload=dict, predictor=str,
         per_gpu=list, interval=dict, modules=list, **_OUTCOME)
register("piep.comparison", 2, workload=dict, candidates=list, recommendation=dict)
register("piep.scenario", 1, model=(str, dict), gpu=str, layout=dict, engine=dict,
         workload=dict)
register("piep.sweep", 1, rows=list)
register("piep.clock_plan", 1, ranks=list, applied=dict, ideal_bound=dict, constraints=dict,
         default=dict)
register("piep.optimize", 2, reference=dict, chosen=dict, front=list, predicted_gain=dict)
register("piep.report", 2, prediction=dict, actions=list, figures=dict)
register("piep.env", 1, piep=str, packages=dict, calibrations=dict)
register("piep.model_tree", 1, tree=dict, nodes=int)
register("piep.measurement", 1, **_WORKLOAD, time_s=NUM, prefill=dict, decode=dict,
         energy_j=OPT_NUM, positive=("time_s", "energy_j"))
register("piep.measurement_failure", 1, **_WORKLOAD, key=str, error=str)
register("piep.module_sample", 1, kind=str, mode=str, time_s=NUM, energy_j=OPT_NUM,
         shape_fields=list)
register("piep.collective_sample", 1, kind=str, mode=str, size_bytes=int, time_s=NUM)
register("piep.module_failure", 1, kind=str, mode=str, shape_fields=list, error=str)
register("piep.host_overhead", 1, launch_gap_power_w=NUM)
register("piep.gpu_calibration", 1, recipe=dict, device=dict, reference=str, spent_s=NUM,
         done=bool)
# the lab's campaigns (calibration/<gpu>/designs/)
register("piep.design_shapes", 1, shapes=dict)
register("piep.engine_designs", 1, drawn=dict, listed=dict)
register("piep.serving_designs", 1, traces=dict, unlisted_shapes=list)
register("piep.e2e_designs", 1, designs=dict, layouts=dict, one_gpu_models=list,
         two_gpu=dict)
register("piep.tp_census", 1, per_layer=dict, outside_layers=dict, world_size=int)
register("piep.kernel_census", 1, model=str, engine=str, prefill=dict, decode_step=dict)
register("piep.insitu", 1, model=str, kind=str, phase=str, device_time_s_per_call=NUM)
register("piep.wait_samples", 1, collective=str, phase=str, mode=str, size_bytes=int,
         durations_ms=list)
register("piep.wait_fits", 1, fits=list)
register("piep.freq_model", 1, gpu=str, f_max_mhz=NUM, f_min_mhz=NUM, params=dict)
register("piep.learned_predictor", 1, gpu=str, kinds=dict, comm=dict, terms=dict,
         combiner=dict, intervals=dict)
register("piep.engine_profile", 1, engine=dict, gpu=str, terms=dict, intervals=dict)
register("piep.gpu_profile", 1, values=dict)
register("piep.steady_profile", 1, profile=dict, fit=dict, data=dict)
register("piep.steady_measurement", 1, model=str, gpu=str, tp=int, engine=dict, workload=dict,
         output_tokens_per_s=NUM, j_per_output_token=NUM,
         positive=("output_tokens_per_s", "j_per_output_token"))
register("piep.steady_state", 1, engine=str, gpu=str, server=dict, workload=dict,
         running_requests=NUM, j_per_output_token=NUM, output_tokens_per_s=NUM,
         power_w=NUM, profile=dict, flags=list)
register("piep.spec_sheets", 1, reference=str, gpus=dict)
register("piep.power_curves", 1, model=str, gpu=str, engine=str, layout=dict, workload=dict,
         points=list)
register("piep.serving", 2, model=str, engine=str, per_request=list, **_OUTCOME)
register("piep.serving_measurement", 1, model=str, engine=dict, energy_j=OPT_NUM, time_s=NUM,
         per_request=list, positive=("time_s", "energy_j"))


def check_document(doc: Any, where: str = "document") -> dict[str, Any]:
    """Validate a document against its registered schema (by its `schema` key)."""
    name = doc.get("schema") if isinstance(doc, dict) else None
    if name not in SCHEMAS:
        raise ArtifactError(f"{where}: {name!r} is not a piep schema "
                            f"({', '.join(sorted(SCHEMAS))})")
    return SCHEMAS[name].check(doc, where)


# the largest document (a scenario, a config, a policy, a result file) piep reads, and the
# longest line of a JSONL file: beyond them a file is not what it claims to be
MAX_DOCUMENT_BYTES = 256 * 1024 ** 2
MAX_LINE_BYTES = 64 * 1024 ** 2


def _input(path: Path | str) -> Path:
    """A file piep reads: it exists and is a file (one line naming it otherwise)."""
    path = Path(path)
    if path.is_dir():
        raise ArtifactError(f"{path} is a folder; give a file")
    if not path.exists():
        raise ArtifactError(f"{path}: no such file")
    return path


def read_text(path: Path | str) -> str:
    path = _input(path)
    try:
        if path.is_file() and path.stat().st_size > MAX_DOCUMENT_BYTES:
            raise ArtifactError(f"{path}: {path.stat().st_size / 1024 ** 2:,.0f} MB is more than "
                                f"a piep document holds ({MAX_DOCUMENT_BYTES // 1024 ** 2} MB); "
                                f"give the right file")
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") \
            from None


def read_json(path: Path | str, schema: str) -> dict[str, Any]:
    """A document of `schema`, checked against its registration (keys, types, and a version
    no newer than this piep reads)."""
    doc = load_json(path)
    if not isinstance(doc, dict) or doc.get("schema") != schema:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise ArtifactError(f"{path}: expected schema {schema!r}, found {found!r}")
    return check_document(doc, str(path))


def read_records(path: Path | str, schema: str, *, given: bool = False,
                 parse: Callable[[dict[str, Any], str], Any] | None = None) -> list[Any]:
    """The records of `schema` in a JSONL file, each checked (other lines are skipped);
    `given`: a file the user named, which must exist (else: none yet, an output to resume);
    `parse(record, where)`: each record typed (e.g. `piep.core.records.Measurement.from_json`).
    The file is read a line at a time: only its records of `schema` are held."""
    if not given and not Path(path).exists():
        return []
    out = []
    for i, r in iter_jsonl(path):
        if isinstance(r, dict) and r.get("schema") == schema:
            where = f"{path}:{i}"
            out.append((parse or (lambda doc, _: doc))(check_document(r, where), where))
    return out


def append_jsonl(path: Path | str, record: dict[str, Any]) -> None:
    """Append one line, flushed to the disk; a crash can lose only the line being written,
    and a line a crash left torn (no newline at the end of the file) is cut before the
    next one is appended."""
    path = writable(path, claim=False)
    try:
        line = json.dumps(record, sort_keys=False, allow_nan=False) + "\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        with _open_for_write(path, "ab") as fh:
            _cut_torn_tail(fh, path)
            fh.write(line.encode())
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise OutputError(f"cannot append to {path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # NaN or Infinity in a record: not JSON
        raise OutputError(f"cannot append to {path}: {exc}") from None


def _cut_torn_tail(fh, path: Path) -> None:
    """In a file open for appending: where its last line has no newline (a write cut short),
    truncate that line away."""
    size = fh.seek(0, os.SEEK_END)
    if not size:
        return
    keep = 0  # after the last newline (none: the whole file is the torn line)
    with open(path, "rb") as rd:
        rd.seek(size - 1)
        if rd.read(1) == b"\n":
            return
        end = size
        while end > 0:  # backwards a block at a time, to the last newline
            start = max(0, end - (1 << 20))
            rd.seek(start)
            cut = rd.read(end - start).rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            end = start
    log.warning("%s: its last line was torn (%d bytes without a newline); cut before "
                "appending", path, size - keep)
    fh.truncate(keep)


def read_input_jsonl(path: Path | str) -> list[Any]:
    """The JSON lines of a file the user gave as input: one that must exist."""
    return [v for _, v in iter_jsonl(path)]


def read_jsonl(path: Path | str) -> list[dict[str, Any]]:
    """The JSON lines of a file ([] where it does not exist yet: an output to resume)."""
    path = Path(path)
    if not path.exists():
        return []
    return [v for _, v in iter_jsonl(path)]


def iter_jsonl(path: Path | str) -> Iterable[tuple[int, Any]]:
    """(line number, JSON value) of each non-blank line of a file, read a line at a time; a
    bad line is one error naming it, except a last line without a newline (an append cut
    short), which is skipped with a warning."""
    path = _input(path)
    where = str(path)
    try:
        with open(path, "rb") as fh:
            lineno = 0
            while True:
                raw = fh.readline(MAX_LINE_BYTES + 1)
                if not raw:
                    return
                lineno += 1
                if len(raw) > MAX_LINE_BYTES:
                    raise ArtifactError(f"{where}:{lineno}: a line longer than "
                                        f"{MAX_LINE_BYTES // 1024 ** 2} MB is not a JSON "
                                        f"line; give the right file")
                if not raw.strip():
                    continue
                try:
                    yield lineno, parse_json(raw.decode(), f"{where}:{lineno}")
                except (ArtifactError, UnicodeDecodeError) as exc:
                    if not raw.endswith(b"\n") and not fh.read(1):  # the last line, torn
                        log.warning("%s:%d: the last line is torn (no newline, not JSON): "
                                    "skipped", where, lineno)
                        return
                    if isinstance(exc, UnicodeDecodeError):
                        raise ArtifactError(f"{where}:{lineno}: not a JSON line (not "
                                            f"UTF-8 text)") from None
                    raise
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def parse_jsonl(text: str, where: str, *, constants: bool = False) -> list[Any]:
    """The JSON values of the non-blank lines of `text`; a bad line is one error naming it
    (`constants` as `parse_json`'s)."""
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.strip():
            rows.append(parse_json(line, f"{where}:{lineno}", constants=constants))
    return rows


def iter_files(folder: Path, pattern: str) -> Iterable[Path]:
    return sorted(Path(folder).glob(pattern))

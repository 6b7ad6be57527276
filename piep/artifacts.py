"""The one place that reads and writes piep's files.

Every file carries `schema`, `schema_version` and provenance, and is written
atomically (temporary file in the same folder, then rename).
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
import platform
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterable

from piep import __version__
from piep.errors import ArtifactError

REPO_ROOT = Path(__file__).resolve().parent.parent


def data_root() -> Path:
    """Folder holding model_trees/ and calibration/ (the repo, or $PIEP_HOME)."""
    return _root(os.environ.get("PIEP_HOME"))


@lru_cache(maxsize=8)
def _root(home: str | None) -> Path:
    return Path(home) if home else REPO_ROOT


def model_trees_dir() -> Path:
    return _trees(data_root())


@lru_cache(maxsize=8)
def _trees(root: Path) -> Path:
    return root / "model_trees"


def calibration_dir(gpu: str) -> Path:
    return data_root() / "calibration" / gpu


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


def _atomic_write(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(path: Path | str, schema: str, version: int, body: dict[str, Any],
               **prov: Any) -> Path:
    doc = {"schema": schema, "schema_version": version, "provenance": provenance(**prov), **body}
    _atomic_write(Path(path), json.dumps(doc, indent=2, sort_keys=False) + "\n")
    return Path(path)


def write_text(path: Path | str, text: str) -> Path:
    _atomic_write(Path(path), text)
    return Path(path)


def load_json(path: Path | str) -> Any:
    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"{path}: no such file")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{path}: not valid JSON ({exc})") from None


def read_text(path: Path | str) -> str:
    path = Path(path)
    if not path.is_file():
        raise ArtifactError(f"{path}: no such file")
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{path}: cannot be read ({exc})") from None


def read_json(path: Path | str, schema: str, max_version: int) -> dict[str, Any]:
    doc = load_json(path)
    if not isinstance(doc, dict) or doc.get("schema") != schema:
        raise ArtifactError(f"{path}: expected schema {schema!r}, found "
                            f"{doc.get('schema') if isinstance(doc, dict) else type(doc).__name__!r}")
    if int(doc.get("schema_version", 0)) > max_version:
        raise ArtifactError(f"{path}: schema_version {doc['schema_version']} is newer than this "
                            f"piep reads ({max_version}); upgrade piep")
    return doc


def append_jsonl(path: Path | str, record: dict[str, Any]) -> None:
    """Append one line; a crash can lose only the line being written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fh.write(json.dumps(record, sort_keys=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_jsonl(path: Path | str) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.is_file():
        return []
    rows = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            raise ArtifactError(f"{path}:{lineno}: not a JSON line") from None
    return rows


def iter_files(folder: Path, pattern: str) -> Iterable[Path]:
    return sorted(Path(folder).glob(pattern))

"""Errors a user can cause. The CLI prints them as one line and exits non-zero."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class PiepError(Exception):
    """Base of every error caused by input, environment or missing artifacts."""

    exit_code = 2


class ConfigError(PiepError):
    """A model config, layout or workload is invalid."""


class FitError(PiepError):
    """A layout does not fit in GPU memory."""


class ArtifactError(PiepError):
    """A file piep reads is missing, malformed or of the wrong schema."""


class DeviceError(PiepError):
    """A GPU, NVML or permission problem."""

    exit_code = 3



class OutputError(PiepError):
    """A file or folder piep was asked to write cannot be written there."""


class MissingExtraError(PiepError):
    """An optional package a command needs is not installed."""


def require_fields(doc: Any, where: str, names: tuple[str, ...], what: str | None = None,
                   *, states: bool = False) -> None:
    """The one check of a record's fields, wherever a record is read: one line naming
    every field of `names` that `doc` lacks (absent or null), and with `states` what
    such a record states."""
    subject = what or "a record"
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{where}: {subject} is a JSON object")
    missing = [k for k in names if doc.get(k) is None]
    if missing:
        raise ConfigError(f"{where}: {what + ' ' if what else ''}lacks {', '.join(missing)}"
                          + (f" ({subject} states {', '.join(names)})" if states else ""))

"""Errors a user can cause. The CLI prints them as one line and exits non-zero."""


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

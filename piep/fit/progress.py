"""What a long fit says while it runs: each held-out fold as it ends, with the time left
at the pace so far (on `piep train`'s log, stderr)."""

from __future__ import annotations

import logging
import time

log = logging.getLogger("piep.train")


class Pace:
    """Folds of one fit, each logged when done with an estimate of the time left."""

    def __init__(self, what: str):
        self.what, self.start = what, time.monotonic()

    def __call__(self, i: int, n: int, name: str) -> None:
        """Fold `i` of `n` (from 1), holding out `name`, is done."""
        left = (time.monotonic() - self.start) / i * (n - i)
        log.info("%s %d/%d (held out: %s), ~%.0f s left", self.what, i, n, name, left)

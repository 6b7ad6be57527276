"""Plain-text tables for the terminal."""

from __future__ import annotations

from typing import Any, Sequence


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1e12 or abs(value) < 1e-6:
            return f"{value:.3g}"
        if abs(value) >= 1e5:  # large: whole numbers, never an exponent beside 83,334.8
            return f"{value:,.0f}"
        if abs(value) < 0.1:  # small (a TPOT in s): three significant digits
            return f"{value:.3g}"
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    return str(value)


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [[fmt(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    def line(items):
        return "  ".join(s.rjust(w) if i else s.ljust(w) for i, (s, w) in enumerate(zip(items, widths)))
    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)

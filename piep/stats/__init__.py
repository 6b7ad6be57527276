"""Statistics shared by the wings: robust fits and intervals.
Any wing may import it; it imports nothing of piep."""

__all__ = ["conformal", "gamma", "search"]

"""Statistics shared by the wings: held-out bands and their coverage, Gamma fits of waits,
a Nelder-Mead that restarts.
Any wing may import it; it imports nothing of piep."""

__all__ = ["conformal", "gamma", "search"]

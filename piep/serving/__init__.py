"""Serving: the continuous-batching scheduler simulator, iteration costs (hf-cb's, vLLM's),
a server held full, `piep serve`'s document.
The API, fit and the command line import it; it imports core/, tree/ and predict/."""

__all__ = ["costs", "paged", "policy", "serve", "simulate", "steady"]

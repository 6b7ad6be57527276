"""Serving: request traces, the continuous-batching scheduler simulator, `piep serve`."""

"""The core: configurations, models, GPUs, layouts, scenarios, traces, the engine registry,
results, records, artifacts and errors - what every wing shares.
Any module of piep may import it; it imports nothing of piep outside itself."""

__all__ = ["artifacts", "config", "engines", "errors", "families", "gpus", "layout", "models",
           "outputs", "records", "results", "scenario", "trace"]

"""The core: configurations, models, GPUs, layouts, scenarios, traces, the engine registry,
results, records, samples, foreign runs, the writer, a GPU's committed calibration data
(dataset), artifacts and errors: what every wing shares.
Any module of piep may import it; it imports nothing of piep outside itself."""

__all__ = ["artifacts", "config", "dataset", "engines", "errors", "families", "foreign", "gpus",
           "layout", "models", "outputs", "records", "results", "samples", "scenario", "trace",
           "writer"]

"""Fitting: what piep learns from measurements (here, the tensor-parallel path of the
transformers engines from runs of another harness; the rest of the fits are still in
piep.predict.train, piep.predict.engines and piep.serving.fit)."""

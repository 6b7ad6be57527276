"""Fitting: what piep learns from measurements. Here: the tensor-parallel path of the
transformers engines from runs of another harness (`tp_path`, `foreign`), the serving
profile from replayed request traces (`serving`), the frequency model and its check on a
clock sweep (`freq`, `freq_check`). Still outside it: the predictor's training
(piep.predict.train, dataset, census) and the engine-profile fits (piep.predict.engines).
"""

"""Fitting: what piep learns from measurements, in one room. The learned predictor's
training (`predictor`, on the calibration records `piep.dataset` reads; the kernel
`census` of an engine), the engine-profile fits (`engines`), the serving profile from
replayed request traces (`serving`), the tensor-parallel path from runs of another
harness (`tp_path`), the frequency model and its check on a clock sweep (`freq`,
`freq_check`), `piep train`'s orchestration (`train`) and what its folds log as they end
(`progress`). piep.predict keeps what a prediction reads; piep.core.records reads what a
measurement record says.
"""

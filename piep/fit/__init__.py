"""Fitting: what piep learns from measurements - the learned predictor (`predictor`, on
records `piep.core.dataset` reads), engine, serving and steady-state profiles, the frequency model.
Only the command line imports it; it imports core/ and the wings below it."""

__all__ = ["census", "engines", "freq", "freq_check", "plausible", "predictor", "serving",
           "steady", "tp_path", "train", "waits", "workers"]

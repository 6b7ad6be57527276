"""The lab: the reference runner, energy windows and the meter, grids, probes, engine
harnesses and other harnesses' result files - what is measured on a GPU (imports torch).
The command line and optimize import it; it imports core/, device/, clocks/, tree/,
the dataset and (to size its designs) predict/."""

__all__ = ["bench_results", "calibrate", "census", "cli_impl", "design", "generate",
           "gpu_calibration", "grid", "hf", "hf_cb", "meter", "model", "modules", "online",
           "options", "probe", "protocol", "runner", "tp_census"]

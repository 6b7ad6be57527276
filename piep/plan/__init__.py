"""Clock planning: the frequency model's use and the plan a runtime applies (NVML, through
piep.clocks and piep.device).
fit, optimize, report and the command line import it; it imports core/ and predict/."""

__all__ = ["freq", "planner"]

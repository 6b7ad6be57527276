"""Clock planning and the runtime that applies plans (NVML, through piep.device)."""

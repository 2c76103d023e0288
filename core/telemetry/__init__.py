"""Hardware readings while tuning: a sampler thread over NVML (GPU) and psutil (CPU)."""

"""Whether a tuned figure holds: confirmation, fresh-process validation, other shapes, bias, baselines, roofline."""

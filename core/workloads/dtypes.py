"""Workload dtypes as text, without TVM (the GUI and the trust reports read them too).

A plain dtype names the inputs, the accumulator and the output alike; a mixed one is "inputs:accumulator"
(``float16:float32``: float16 inputs multiplied and summed in float32 into a float32 output, as tensor
cores compute; ``bfloat16:float32`` likewise with bfloat16 inputs, which NumPy knows through ml_dtypes, a
dependency of TVM).
"""

from __future__ import annotations

MIXED_F16_F32 = "float16:float32"
MIXED_BF16_F32 = "bfloat16:float32"


def split_dtype(dtype: str) -> tuple[str, str]:
    """``(input dtype, accumulator and output dtype)``: "float16:float32" -> both, "float32" -> twice."""
    inputs, _, out = str(dtype).partition(":")
    return inputs, out or inputs

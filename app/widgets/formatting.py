"""How numbers, configs and durations read in every view (one place, so the views agree)."""

from __future__ import annotations

import json
import math
from typing import Any

from tunelab.core.records import is_auto_config
from tunelab.core.workloads.shape_text import format_shape


def fmt_ms(value: float | None) -> str:
    """A latency in milliseconds with 4 significant digits; an em dash when there is none."""
    if value is None or not math.isfinite(value):
        return "—"
    if value >= 100:
        return f"{value:.1f}"
    return f"{value:.4g}"


def gflops(flops: float, latency_ms: float | None) -> float | None:
    """GFLOP/s of one kernel call of `flops` FLOP taking `latency_ms`."""
    if latency_ms is None or latency_ms <= 0 or not flops:
        return None
    return flops / (latency_ms * 1e-3) / 1e9


def fmt_gflops(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value:.1f}" if value >= 10 else f"{value:.3g}"


def fmt_duration(seconds: float | None) -> str:
    """'2 h 05 min', '3 min 12 s', '40 s'; an em dash when unknown."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "—"
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds} s"


def fmt_fresh_runs(runs: int, devices: tuple[str, ...] = ()) -> str:
    """Where a confirmation's runs were: '5 fresh processes' here, or '3 fresh sessions on the RPC
    servers' for a session measured (and so confirmed) through a tracker."""
    if devices:
        return f"{runs} fresh session{'s' if runs != 1 else ''} on the RPC server{'s' if len(devices) != 1 else ''}"
    return f"{runs} fresh process{'es' if runs != 1 else ''}"


def fmt_shape(shape: dict[str, int]) -> str:
    """'M=512,N=256': the engine's shape text (tunelab.core.workloads.shape_text)."""
    return format_shape(shape)


def default_shapes(shape: dict[str, int]) -> str:
    """A shape list to suggest: the first parameter at a quarter, half, once and twice its value."""
    if not shape:
        return ""
    name, value = next(iter(shape.items()))
    values = sorted({max(1, value // 4), max(1, value // 2), value, value * 2})
    return f"{name}={','.join(map(str, values))}"


def config_summary(config: dict[str, Any]) -> str:
    """One line for a table cell: 'tile_i=[8] tile_j=[16] order=ro,ri,si …' or 'sketch 1: [4,8] 2 …'."""
    if is_auto_config(config):
        parts = [json.dumps(d, separators=(",", ":")) for d in config["decisions"] if d is not None]
        if "parallel" in config:
            parts.append("parallel≤" + ",".join(str(v) for v in config["parallel"]))
        return f"sketch {config['sketch']}: " + " ".join(parts)
    return " ".join(f"{k}={_short_value(v)}" for k, v in config.items())


def _short_value(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def flatten_config(config: dict[str, Any]) -> dict[str, Any]:
    """Knob name -> value; an auto-space config becomes 'sketch' plus 'decision N' entries."""
    if is_auto_config(config):
        flat: dict[str, Any] = {"sketch": config["sketch"]}
        for i, d in enumerate(config["decisions"]):
            flat[f"decision {i}"] = d
        for i, limit in enumerate(config.get("parallel", [])):
            flat[f"parallel limit {i}"] = limit
        return flat
    return dict(config)


def first_line(text: str | None, limit: int = 160) -> str:
    if not text:
        return ""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    # TVM errors end with the line that says what went wrong; tracebacks start with noise.
    line = lines[-1].strip() if lines else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"

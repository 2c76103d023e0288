"""CPU models this host cannot execute, for the tests of their refusal."""

from __future__ import annotations

import pytest


def an_mcpu_this_host_lacks() -> str:
    """An x86 CPU name whose features this host lacks; skips the test where there is none (or no x86)."""
    from tunelab.core.target.host_cpu import host_cpu, missing_features

    host = host_cpu()
    if host.arch != "x86_64":
        pytest.skip("the refusal is tested with x86 CPU names")
    for mcpu in ("znver4", "sapphirerapids", "graniterapids", "diamondrapids"):
        if missing_features(mcpu, (), host):
            return mcpu
    pytest.skip("this host executes every x86 CPU model tried")

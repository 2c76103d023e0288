"""Shared by every test directory: caches live in the test run's own folder, never the user's."""

from __future__ import annotations

import os
import tempfile

# The target self-check caches its passes (tunelab.core.target.selfcheck); children started by tests inherit this.
os.environ.setdefault("TUNELAB_CACHE_DIR", tempfile.mkdtemp(prefix="tunelab-test-cache-"))

# TVM's default thread pool is half the CPUs on x86; tunelab's processes use every core, and so do the
# tests that run kernels in this process (tunelab.core.measure.threads).
from tunelab.core.measure.threads import use_every_core

use_every_core()


def pytest_collection_modifyitems(config, items) -> None:
    """The modules that hold slow tests first (in their order), the quick ones after, each module's tests
    kept together (its fixtures are made once). With the suite on several workers (scripts/test.sh) each
    worker's last tests are then short ones: no core idles at the end while the other runs a long test."""
    slow_modules = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_modules)  # stable: the order within each group

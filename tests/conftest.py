"""Shared by every test directory: caches live in the test run's own folder, never the user's."""

from __future__ import annotations

import os
import tempfile

# The target self-check caches its passes (tunelab.core.target.selfcheck); children started by tests inherit this.
os.environ.setdefault("TUNELAB_CACHE_DIR", tempfile.mkdtemp(prefix="tunelab-test-cache-"))

"""tunelab's engine: workloads, search spaces, tuners, measurement, store, sessions.

Nothing under ``core`` imports Qt (an import-linter contract checks it).
"""

__version__ = "0.1.0"

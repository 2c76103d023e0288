"""tunelab: a desktop lab for TVM kernel tuning.

The installed namespace: ``tunelab.core`` (the engine, the repository's ``core/`` folder) and
``tunelab.app`` (the desktop app, ``app/``); pyproject.toml's ``package-dir`` maps the folders.
"""

__version__ = "0.1.0"

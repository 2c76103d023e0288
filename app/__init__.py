"""tunelab's desktop app: PySide6 + pyqtgraph views over the core's store.

The app never keeps its own copy of session state: every view reads the store (tunelab.core.store.Store)
and refreshes when the store changes. Tuning runs in a worker thread; the GUI thread only draws.
"""

"""The `tunelab` command line over the core use cases (never imports the GUI)."""

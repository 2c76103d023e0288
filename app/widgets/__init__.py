"""Small reusable widgets and helpers: run bar, message bar, axes, plot export, table models, formatting."""

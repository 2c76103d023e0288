"""Exporting a tuned schedule: schedule file, TVMScript, compiled library, MetaSchedule database; loading it back."""

"""Building and running candidates: the runner (MetaSchedule LocalBuilder / LocalRunner), buffer placement."""

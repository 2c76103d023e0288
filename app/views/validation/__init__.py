"""The Validation panel: `view` runs a validation (the use case tunelab.core.usecases.validation) in a worker
and shows its progress, `drawing` draws a report: the verdict in words, its tables and the shapes plot."""

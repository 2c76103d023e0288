"""Errors with a message for the user. The CLI turns each into one line on stderr.

Exit codes (``tunelab`` on the command line): :class:`TunelabError` is bad input and exits 2;
:class:`StoreFailure`, a store or disk that fails while tunelab works (a full disk, an I/O error,
a database locked for longer than the busy timeout), exits 3: the input was fine.
"""


class TunelabError(Exception):
    """Base for every error with a message for the user (bad input, unless it is a StoreFailure).

    The message speaks in the engine's terms ("the trial budget must be at least 1"); ``option``
    names the setting it is about ("trials"), which the CLI shows as its flag and the app as its field.
    """

    def __init__(self, message: str = "", *, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class WorkloadError(TunelabError):
    """Unknown workload, bad shape parameter or dtype."""


class SpaceError(TunelabError):
    """A search space (or a knob value in it) that the workload's axes do not allow."""


class TunerError(TunelabError):
    """Unknown tuner or bad tuner option."""


class TargetError(TunelabError):
    """A target that cannot be parsed or used here."""


class StoreError(TunelabError):
    """Missing or corrupt database, unknown session or trial, a database that cannot be written."""


class StoreFailure(StoreError):
    """The store's file or disk failed underneath tunelab (disk full, I/O error, locked too long).

    Not bad input: the CLI exits 3 for it. It is a StoreError so that every place that shows a store's
    error as a message shows this one too."""


class Cancelled(Exception):
    """A person stopped the work (a validation, a confirmation): not an error, and not their input's."""


class SessionBusyError(StoreError):
    """The session is being tuned by another live process (a session has one runner at a time)."""


class StoreLockedError(StoreFailure):
    """Another process held the database's write lock for longer than this process would wait."""


def shown(value: object, limit: int = 60) -> str:
    """`value` as an error message quotes it: its repr (line breaks escaped, so the message stays one
    line) cut to about `limit` characters (a pasted page must not come back as the message)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return text[: limit - 4] + ("...'" if isinstance(value, str) else "...")


def first_line(exc: BaseException, limit: int = 240) -> str:
    """The first line of an error (a TVM error's says what it found wrong), cut short; its type when empty."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0][:limit] if lines else type(exc).__name__

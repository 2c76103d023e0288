"""Errors a user can cause. The CLI turns each into one line on stderr and exit code 2."""


class TunelabError(Exception):
    """Base for every error caused by bad input; the message is shown to the user as is."""


class WorkloadError(TunelabError):
    """Unknown workload, bad shape parameter or dtype."""


class SpaceError(TunelabError):
    """A search space (or a knob value in it) that the workload's axes do not allow."""


class TunerError(TunelabError):
    """Unknown tuner or bad tuner option."""


class TargetError(TunelabError):
    """A target that cannot be parsed or used here."""


class StoreError(TunelabError):
    """Missing or corrupt database, unknown session or trial."""


class SessionBusyError(StoreError):
    """The session is being tuned by another live process (a session has one runner at a time)."""


class StoreLockedError(StoreError):
    """Another process held the database's write lock for longer than this process would wait."""

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


def shown(value: object, limit: int = 60) -> str:
    """`value` as an error message quotes it: its repr (line breaks escaped, so the message stays one
    line) cut to about `limit` characters (a pasted page must not come back as the message)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return text[: limit - 4] + ("...'" if isinstance(value, str) else "...")

"""The SQLite store, the single source of truth: schema, migrations, sessions, trials, column reads.

Import from here: :class:`Store` and the names its users need. The modules each hold one concern:
``schema`` (the migrations), ``connection`` (opening, transactions, errors), ``sessions``, ``trials``,
``columns`` (the column reads), ``telemetry_rows``, ``artifacts`` (validations, baselines, machine
profiles), ``store`` (the Store that puts them together) and ``telemetry_sink`` (the sampler's writer).
"""

from tunelab.core.store.columns import TRIAL_COLUMNS, TRIAL_FLOAT_COLUMNS
from tunelab.core.store.connection import (
    APP_ID,
    BUSY_TIMEOUT_S,
    SESSION_WRITE_PATIENCE_S,
    WRITE_PATIENCE_ENV,
    default_db_path,
    is_store_failure,
    session_write_patience,
)
from tunelab.core.store.schema import MIGRATIONS, Migration, migration, schema_version
from tunelab.core.store.sessions import HEARTBEAT_STALE_S
from tunelab.core.store.store import Store

__all__ = [
    "APP_ID",
    "BUSY_TIMEOUT_S",
    "HEARTBEAT_STALE_S",
    "MIGRATIONS",
    "SESSION_WRITE_PATIENCE_S",
    "TRIAL_COLUMNS",
    "TRIAL_FLOAT_COLUMNS",
    "WRITE_PATIENCE_ENV",
    "Migration",
    "Store",
    "default_db_path",
    "is_store_failure",
    "migration",
    "schema_version",
    "session_write_patience",
]

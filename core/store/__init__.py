"""The SQLite store, the single source of truth: schema, migrations, sessions, trials, column reads."""

from tunelab.core.store.connection import (
    APP_ID,
    BUSY_TIMEOUT_S,
    HEARTBEAT_STALE_S,
    MIGRATIONS,
    SESSION_WRITE_PATIENCE_S,
    TRIAL_COLUMNS,
    WRITE_PATIENCE_ENV,
    Migration,
    Store,
    default_db_path,
    is_store_failure,
    migration,
    schema_version,
    session_write_patience,
)

__all__ = [
    "APP_ID",
    "BUSY_TIMEOUT_S",
    "HEARTBEAT_STALE_S",
    "MIGRATIONS",
    "SESSION_WRITE_PATIENCE_S",
    "TRIAL_COLUMNS",
    "WRITE_PATIENCE_ENV",
    "Migration",
    "Store",
    "default_db_path",
    "is_store_failure",
    "migration",
    "schema_version",
    "session_write_patience",
]

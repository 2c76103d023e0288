"""The SQLite store, the single source of truth: schema, migrations, sessions, trials, column reads."""

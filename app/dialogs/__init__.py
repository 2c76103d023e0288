"""Dialogs: new session (with the search-space editor), export."""

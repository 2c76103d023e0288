"""The trials table: `model` holds a session's trials as columns, `proxy` sorts and filters them, `widget`
shows them with a detail pane and copies or exports what is shown."""

"""The tuning session loop: ask -> predict -> build -> run -> store -> tell."""

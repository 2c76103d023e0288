"""What a person asks of tunelab, one function each, called alike by the command line and the desktop app."""

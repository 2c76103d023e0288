"""Where the GUI learns about work it does not do itself: tuning and engine calls off the GUI thread, store watching."""

"""The main window's views: session browser, live plot, cost model, hardware, trials, compare, validation."""

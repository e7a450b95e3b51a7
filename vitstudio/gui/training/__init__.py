"""The Training tab: dataset, settings, live curves, results and the run history."""

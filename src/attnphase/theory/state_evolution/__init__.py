"""The state evolution: precision presets, the map of one branch, starts, solve, curves, the landscape, results."""

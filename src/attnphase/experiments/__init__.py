"""Finite-d experiments: the attention-layer simulations, the basins study, resumable sweeps and the SQLite store."""

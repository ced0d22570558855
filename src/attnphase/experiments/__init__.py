"""Finite-d experiments: the attention-layer simulations, the counting-task transformer (histogram), the basins
study, resumable sweeps and the SQLite store."""

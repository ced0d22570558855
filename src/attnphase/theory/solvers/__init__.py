"""Solvers that know no physics: fixed-point iterations (Anderson, chord) returning SolverResult, continuation."""

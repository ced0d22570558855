"""Experiments on real models beyond the solvable one (each in its own subpackage)."""

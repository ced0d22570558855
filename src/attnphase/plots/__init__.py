"""Figures: one style and save rule (style), the theory/simulation/phase-diagram figures (figures), and one module
per further family (rank, untied, basins).  They draw what the theory and the experiments returned and compute no
physics."""

from attnphase.plots.figures import (
    plot_finite_size,
    plot_loss_difference,
    plot_overlaps,
    plot_phase_diagram,
    plot_test_error,
)
from attnphase.plots.style import BRANCH_STYLE, save_figure

__all__ = ["BRANCH_STYLE", "plot_finite_size", "plot_loss_difference", "plot_overlaps", "plot_phase_diagram",
           "plot_test_error", "save_figure"]

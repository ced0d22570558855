"""The physics of the model, once: overlaps and their layout, prior side, channel side, loss and attention,
observables, the linear baseline, quadrature."""

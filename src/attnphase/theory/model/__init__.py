"""The physics of the model (its formulas are attnphase.problem): overlaps and their layout, prior side, channel
side, the two-token loss in closed form, observables, the linear baseline, quadrature."""

"""The transition between the positional and the semantic minimum: records, the driver, branch ends, roots, the
phase diagram over omega."""

"""The two exceptions of bad input.  Every check of what a user passed raises one of them (a ValueError or TypeError,
as the API promises); the command line prints exactly these as one line with exit code 2, and lets every other
exception through as the traceback of a bug."""


class InputError(ValueError):
    """A value the user passed is not acceptable (out of range, inconsistent, a file that cannot be used)."""


class InputTypeError(TypeError):
    """A value the user passed has the wrong type."""

"""Errors the command line reports as one readable message (no traceback)."""


class ParamsError(ValueError):
    """params.yaml is invalid; the message lists every problem with its key and the allowed values."""

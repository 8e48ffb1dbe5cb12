"""The viewer's one error, below every viewer module (the page, the server and the builder all raise it)."""


class ViewerError(ValueError):
    """A bad input to the viewer, said before work starts."""

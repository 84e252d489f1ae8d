"""The one error hierarchy: messages name the subject, what was seen and what was expected."""


class MinihpcError(Exception):
    """Base of every error the CLI reports as one line (exit status 1)."""


class UsageError(MinihpcError):
    """Bad input from the user: a flag, a script, a time limit, a dependency."""


class NotFound(MinihpcError):
    """A job or node that does not exist."""


class ClusterUnavailable(MinihpcError):
    """Redis cannot be reached, or no cluster state is there."""


class Unauthorized(MinihpcError):
    """No API token, or one the cluster does not know."""


class Forbidden(MinihpcError):
    """The user is known but may not do this (another user's job, an operator's command)."""


class Conflict(UsageError):
    """The request is valid but not in the subject's current state (cancel an ended job)."""

"""What a server's ``-ERR`` means: a typed error, and whether the connection survives it.

nats-server keeps the connection open after a few errors (a permissions violation, an
invalid subject, too many subscriptions) and closes it after every other one. This
module only reads the text; acting on it (reporting, closing) is the connection's job.
"""

from __future__ import annotations

from txnats.errors import AuthorizationError, PermissionViolationError, ServerError

__all__ = ["classify_error"]


def classify_error(message: str) -> tuple[ServerError, bool]:
    """Map a ``-ERR`` text to a typed error, and whether the connection survives it.

    :param message: the error text, without the quotes the server puts around it.
    :returns: ``(error, survives)``: a :class:`PermissionViolationError` (with the
        operation and subject named by the server) that survives; a plain
        :class:`ServerError` that survives for an invalid subject or too many
        subscriptions; an :class:`AuthorizationError` that does not, for an
        authorization, authentication or expired-account error; and a plain
        :class:`ServerError` that does not for anything else.
    """
    low = message.lower()
    if low.startswith("permissions violation"):
        op = "subscribe" if "subscription" in low else "publish"
        subject = ""
        if " to " in message:
            subject = message.split(" to ", 1)[1].strip()
            if subject.startswith('"'):
                subject = subject[1:].split('"', 1)[0]
            else:
                subject = subject.split(" ", 1)[0]
        return PermissionViolationError(message, operation=op, subject=subject), True
    if low.startswith(("invalid subject", "invalid publish subject",
                       "maximum subscriptions exceeded")):
        return ServerError(message), True
    if (
        "authorization" in low
        or "authentication" in low
        or low.startswith("user authentication")
        or ("account" in low and "expired" in low)
    ):
        return AuthorizationError(message), False
    if low.startswith("stale connection"):
        err: ServerError = ServerError(message)
        return err, False
    return ServerError(message), False

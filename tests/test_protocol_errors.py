"""Tests for :func:`txnats.protocol.errors.classify_error`, branch by branch.

Each ``-ERR`` text maps to one error type and one verdict on the connection: a
permissions violation (with its operation and subject), an invalid subject and too many
subscriptions survive; authorization, authentication and expired-account errors close
the connection as :class:`AuthorizationError`; a stale connection and anything unknown
close it as a plain :class:`ServerError`.
"""

from __future__ import annotations

import ast
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

import txnats.protocol.errors
from txnats.errors import AuthorizationError, PermissionViolationError, ServerError
from txnats.protocol.errors import classify_error

# (server text, operation, subject) for permissions violations.
PERMISSIONS = [
    ("Permissions Violation for Publish to foo.bar", "publish", "foo.bar"),
    ('Permissions Violation for Publish to "foo.bar"', "publish", "foo.bar"),
    ("Permissions Violation for Subscription to foo.bar", "subscribe", "foo.bar"),
    ('Permissions Violation for Subscription to "foo.bar"', "subscribe", "foo.bar"),
    # A queue group after the subject, quoted or not: the subject alone is kept.
    ('Permissions Violation for Subscription to "foo.bar" using queue "q"', "subscribe",
     "foo.bar"),
    ("Permissions Violation for Subscription to foo.bar using queue q", "subscribe",
     "foo.bar"),
    # The kind is found whatever the case; the subject only after " to " as nats-server
    # writes it (lowercase). A quote left open ends at the end of the text.
    ("permissions violation for publish to a.b", "publish", "a.b"),
    ("PERMISSIONS VIOLATION FOR SUBSCRIPTION TO A.B", "subscribe", ""),
    ('Permissions Violation for Publish to "a b', "publish", "a b"),
    # No " to ": no subject; an operation other than Subscription counts as publish.
    ("Permissions Violation", "publish", ""),
    ("Permissions Violation for Subscription", "subscribe", ""),
    ("Permissions Violation for Response to _INBOX.x", "publish", "_INBOX.x"),
]
# Texts that leave the connection up as a plain ServerError.
SURVIVING_PLAIN = [
    "Invalid Subject",
    "invalid subject",
    "Invalid Publish Subject",
    "Maximum Subscriptions Exceeded",
    "maximum subscriptions exceeded",
]
# Texts that close the connection as AuthorizationError.
FATAL_AUTH = [
    "Authorization Violation",
    "authorization violation",
    "Authorization Timeout",
    "User Authentication Expired",
    "User Authentication Revoked",
    "Account Authentication Expired",
    "Authentication Timeout",
    # Neither "authorization" nor "authentication": an expired account still is one.
    "Account Expired",
    "account has expired",
]
# Texts that close the connection as a plain ServerError.
FATAL_PLAIN = [
    "Stale Connection",
    "stale connection",
    "Unknown Protocol Operation",
    "Maximum Payload Violation",
    "Slow Consumer",
    "Secure Connection - TLS Required",
    "maximum connections exceeded",
    "",
    # One of the words of an auth error without the other is nothing special.
    "Account Not Found",
    "Expired",
    # A surviving error's words, not at the start of the text.
    "Unknown: Invalid Subject",
    "Server Error: Permissions Violation for Publish to x",
]


class ClassifyErrorTests(SynchronousTestCase):
    """Every branch of classify_error: the error type, its fields and the verdict."""

    def test_permissions_violations(self) -> None:
        """A permissions violation survives, naming the operation and the subject."""
        for message, operation, subject in PERMISSIONS:
            err, survives = classify_error(message)
            self.assertIs(type(err), PermissionViolationError, message)
            assert isinstance(err, PermissionViolationError)
            self.assertTrue(survives, message)
            self.assertEqual((err.operation, err.subject), (operation, subject), message)
            self.assertEqual(err.server_message, message)

    def test_invalid_subject_and_maximum_subscriptions(self) -> None:
        """An invalid subject or too many subscriptions survives as a plain ServerError."""
        for message in SURVIVING_PLAIN:
            err, survives = classify_error(message)
            self.assertIs(type(err), ServerError, message)
            self.assertTrue(survives, message)
            self.assertEqual(err.server_message, message)

    def test_authorization_errors(self) -> None:
        """Authorization, authentication and expired-account errors close the
        connection as AuthorizationError."""
        for message in FATAL_AUTH:
            err, survives = classify_error(message)
            self.assertIs(type(err), AuthorizationError, message)
            self.assertFalse(survives, message)
            self.assertEqual(err.server_message, message)

    def test_stale_and_unknown_errors(self) -> None:
        """A stale connection and any other text close the connection as a plain
        ServerError carrying the text."""
        for message in FATAL_PLAIN:
            err, survives = classify_error(message)
            self.assertIs(type(err), ServerError, message)
            self.assertFalse(survives, message)
            self.assertEqual(err.server_message, message)
            self.assertEqual(str(err), message)

    def test_each_call_makes_a_new_error(self) -> None:
        """Two calls with the same text give two distinct error objects."""
        first, _ = classify_error("Stale Connection")
        second, _ = classify_error("Stale Connection")
        self.assertIsNot(first, second)


class ModuleTests(SynchronousTestCase):
    """txnats.protocol.errors stays sans-IO and small."""

    def test_imports_only_txnats_errors(self) -> None:
        """The module imports nothing but txnats.errors (and __future__)."""
        source = Path(txnats.protocol.errors.__file__).read_text(encoding="utf-8")
        imported = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom):
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
        self.assertEqual(imported, {"__future__", "txnats.errors"})

    def test_exports(self) -> None:
        """classify_error is the module's one public name."""
        self.assertEqual(txnats.protocol.errors.__all__, ["classify_error"])

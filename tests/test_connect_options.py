"""Connection options are declared once: the fields of ``Options``.

Before, every option was written three times (``connect()``'s signature, the
``Options(...)`` call inside it, the dataclass) and its default twice, and ``Options``
had two import homes. Now ``connect(reactor, servers, **options)`` hands its keywords
to ``Options``, whose fields carry the one default and the one description each;
type checkers see them as ``connect``'s keyword parameters (a ParamSpec), and a
misspelt one is a ``TypeError`` naming the closest option at run time too.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase

from txnats import InvalidArgumentError, Options, connect
from txnats.tls import TLSConfig

ROOT = Path(__file__).resolve().parent.parent


class OneDeclarationTests(SynchronousTestCase):
    def test_connect_declares_no_option(self) -> None:
        """connect() takes the reactor, the servers and **options: no option of its own,
        so no second default anywhere."""
        params = inspect.signature(connect).parameters
        self.assertEqual(list(params), ["reactor", "servers", "options"])
        self.assertEqual(params["options"].kind, inspect.Parameter.VAR_KEYWORD)

    def test_one_home(self) -> None:
        """Options is exported by txnats, and txnats.client no longer re-exports it."""
        import txnats.client
        import txnats.options

        self.assertIs(txnats.Options, txnats.options.Options)
        self.assertNotIn("Options", txnats.client.__all__)

    def test_every_option_is_documented(self) -> None:
        """Each field of Options has a ``#:`` comment (its own, or its group's) saying
        what it does; the API reference shows them."""
        source = (ROOT / "txnats" / "options.py").read_text().splitlines()
        tree = ast.parse("\n".join(source))
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Options")
        undocumented = []
        documented = False
        previous_end = cls.body[0].end_lineno or 0  # the docstring
        for node in cls.body[1:]:
            if not isinstance(node, ast.AnnAssign):
                break
            between = source[previous_end : node.lineno - 1]
            if any(line.strip().startswith("#:") for line in between):
                documented = True
            elif between:  # a blank line or plain comment ends a documented group
                documented = False
            if not documented:
                assert isinstance(node.target, ast.Name)
                undocumented.append(node.target.id)
            previous_end = node.end_lineno or node.lineno
        self.assertEqual(undocumented, [])
        self.assertGreaterEqual(len(dataclasses.fields(Options)), 40)


class KeywordTests(SynchronousTestCase):
    def test_unknown_option_names_the_closest(self) -> None:
        """A misspelt option is a TypeError naming it and the closest option."""
        clock = MemoryReactorClock()
        for wrong, right in [("nmae", "name"), ("ping_intervall", "ping_interval"),
                             ("tls_ca_fle", "tls_ca_file"), ("max_reconect_attempts",
                                                        "max_reconnect_attempts")]:
            with self.assertRaises(TypeError) as cm:
                connect(clock, "nats://127.0.0.1:4222", **{wrong: 1})  # type: ignore[arg-type]
            self.assertIn(repr(wrong), str(cm.exception))
            self.assertIn(f"did you mean {right!r}", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            connect(clock, "nats://127.0.0.1:4222", zzzzzz=1)  # type: ignore[call-arg]
        self.assertNotIn("did you mean", str(cm.exception))
        self.assertEqual(clock.tcpClients, [])

    def test_bad_value_fails_the_deferred(self) -> None:
        """A bad value makes connect() fail at once, naming the option."""
        d = connect(MemoryReactorClock(), "nats://h", ping_interval=-1.0)
        f = self.failureResultOf(d, InvalidArgumentError)
        self.assertIn("ping_interval", str(f.value))

    def test_tls_shorthand(self) -> None:
        """The tls_* options make the TLSConfig; giving tls= as well is refused."""
        opts = Options(tls_ca_file="ca.pem", tls_hostname="n.example")
        self.assertEqual(opts.tls, TLSConfig(ca_file="ca.pem", hostname="n.example"))
        self.assertEqual(dataclasses.replace(opts, name="x").tls, opts.tls)
        with self.assertRaises(InvalidArgumentError):
            Options(tls=TLSConfig(ca_file="a.pem"), tls_ca_file="b.pem")
        self.assertIsNone(Options().tls)

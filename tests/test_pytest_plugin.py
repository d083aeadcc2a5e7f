"""
The pytest plugin (``txnats.testing.pytest_plugin``), used as a user uses it.

Two kinds of test live here:

- pytest-style functions that take the plugin's fixtures, written in each style
  pytest-twisted runs (``inlineCallbacks``, ``ensureDeferred``, plain ``async def``).
  trial does not load pytest plugins and collects only ``TestCase`` classes, so it
  imports this module and runs none of them; ``python -m pytest`` runs them.
- pytester tests that write a throw-away project and run pytest on it in a child
  process (``runpytest_subprocess``): a fresh directory, no conftest, the plugin found
  through its entry point.

The suite's other files are trial ``TestCase`` classes run by the same pytest session:
the plugin hands the reactor back after each test here (see the plugin's docstring),
and ``test_mixed_session_with_trial_tests`` checks that in a child run.
"""

from __future__ import annotations

import os
import sys
import textwrap
from typing import Any

import pytest
import pytest_twisted

import txnats
from txnats.testing import MemoryNats, NatsServer

pytest_plugins = ["pytester"]


# --------------------------------------------------------------------- the fixtures
@pytest_twisted.inlineCallbacks
def test_client_round_trip_inline_callbacks(nats_client: txnats.Client) -> Any:
    """inlineCallbacks style: nats_client is connected to nats_server."""
    sub = nats_client.subscribe("plugin.ic")
    nats_client.publish("plugin.ic", b"hello")
    msg = yield sub.next_msg(timeout=5)
    assert msg.data == b"hello"


@pytest_twisted.ensureDeferred
async def test_request_reply_ensure_deferred(
    nats_client: txnats.Client, nats_server: NatsServer
) -> None:
    """ensureDeferred style: a responder and a requester on the same server."""
    nats_client.subscribe("plugin.echo", lambda m: m.respond(b"re:" + m.data))
    await nats_client.flush(timeout=5)
    reply = await nats_client.request("plugin.echo", b"x", timeout=5)
    assert reply.data == b"re:x"
    assert nats_client.connected_url == nats_server.url


async def test_memory_plain_async(memory_nats_client: txnats.Client,
                                  memory_nats: MemoryNats) -> None:
    """A plain async def test: the in-memory server, on pytest-twisted's reactor."""
    sub = memory_nats_client.subscribe("plugin.mem.*")
    memory_nats_client.publish("plugin.mem.a", b"1")
    msg = await sub.next_msg(timeout=5)
    assert msg.subject == "plugin.mem.a"
    assert [m.subject for m in memory_nats.messages] == ["plugin.mem.a"]


def test_plain_async_failure_is_reported(pytester: pytest.Pytester) -> None:
    """A plain async def test really is awaited: a failing assertion after an await
    fails it (run in a child pytest)."""
    pytester.makepyfile(test_fails="""
        async def test_after_await(memory_nats_client):
            await memory_nats_client.flush(timeout=5)
            assert False, "reached after the await"
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*reached after the await*"])


@pytest_twisted.ensureDeferred
async def test_fault_proxy_blackhole(
    nats_fault_proxy: Any, nats_connect: Any
) -> None:
    """nats_fault_proxy sits in front of nats_server; a blackhole holds a flush."""
    nc = await nats_connect(nats_fault_proxy.url)
    await nc.flush(timeout=5)
    nats_fault_proxy.blackhole()
    from txnats import TimeoutError as NatsTimeout

    with pytest.raises(NatsTimeout):
        await nc.flush(timeout=0.3)
    nats_fault_proxy.pass_through()
    await nc.flush(timeout=5)


@pytest_twisted.ensureDeferred
async def test_cluster(nats_cluster: Any, nats_connect: Any) -> None:
    """nats_cluster: a message crosses from one node to another."""
    sub_nc = await nats_connect(nats_cluster.urls[0])
    pub_nc = await nats_connect(nats_cluster.urls[1])
    sub = sub_nc.subscribe("plugin.cluster")
    await sub_nc.flush(timeout=5)
    nats_cluster.wait_for_interest("plugin.cluster")
    pub_nc.publish("plugin.cluster", b"across")
    msg = await sub.next_msg(timeout=5)
    assert msg.data == b"across"


@pytest_twisted.ensureDeferred
async def test_jetstream_server(nats_jetstream_server: NatsServer, nats_connect: Any) -> None:
    """nats_jetstream_server has JetStream (the in-memory server has not)."""
    nc = await nats_connect(nats_jetstream_server.url)
    info = await nc.jetstream().account_info()
    assert info is not None


# --------------------------------------------------------------------- as a user
USER_TEST = """
    import pytest_twisted

    @pytest_twisted.ensureDeferred
    async def test_round_trip(nats_server, nats_client):
        sub = nats_client.subscribe("user.subject")
        nats_client.publish("user.subject", b"hi")
        msg = await sub.next_msg(timeout=5)
        assert msg.data == b"hi"
        assert nats_client.connected_url == nats_server.url

    async def test_in_memory(memory_nats_client):
        reply = memory_nats_client.request("nobody", b"?", timeout=5)
        import txnats
        try:
            await reply
        except txnats.NoRespondersError:
            pass
        else:
            raise AssertionError("expected no responders")
"""


def test_user_project_without_conftest(pytester: pytest.Pytester) -> None:
    """A fresh directory with one test file and no conftest: the fixtures are there
    (found through the entry point) and the tests pass."""
    pytester.makepyfile(test_user=USER_TEST)
    assert not (pytester.path / "conftest.py").exists()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_fixtures_listed(pytester: pytest.Pytester) -> None:
    """pytest --fixtures lists the plugin's fixtures."""
    result = pytester.runpytest_subprocess("--fixtures", "-p", "no:cacheprovider")
    for name in ("nats_server", "nats_client", "nats_cluster", "nats_fault_proxy",
                 "nats_jetstream_server", "nats_connect", "memory_nats"):
        result.stdout.fnmatch_lines([f"{name}*"])


def _without_nats_server(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the child run find no nats-server (NATS_SERVER_BIN names a missing file)."""
    monkeypatch.setenv("NATS_SERVER_BIN", str(pytester.path / "no-such-nats-server"))


def test_missing_binary_skips(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without nats-server, the tests that need it are skipped, saying why; the
    in-memory ones still run; loading the plugin breaks nothing."""
    _without_nats_server(pytester, monkeypatch)
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*nats-server not found*"])


def test_missing_binary_required_errors(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --nats-server-required, a missing nats-server is an error, not a skip."""
    _without_nats_server(pytester, monkeypatch)
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--nats-server-required")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*nats-server is required and was not found*"])


def test_session_scope(pytester: pytest.Pytester) -> None:
    """--nats-server-scope=session: every test gets the same server."""
    pytester.makepyfile(test_scope="""
        ports = []

        def test_one(nats_server):
            ports.append(nats_server.port)

        def test_two(nats_server):
            ports.append(nats_server.port)
            assert ports[0] == ports[1]
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider",
                                           "--nats-server-scope=session")
    result.assert_outcomes(passed=2)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)


MIXED = """
    import pytest_twisted
    from twisted.internet import reactor, task, threads
    from twisted.trial import unittest

    @pytest_twisted.ensureDeferred
    async def test_a_first(memory_nats_client):
        await memory_nats_client.flush(timeout=5)

    class TrialAfter(unittest.TestCase):
        def test_deferred(self):
            return task.deferLater(reactor, 0.01, lambda: None)

        async def test_async(self):
            await task.deferLater(reactor, 0.01, lambda: None)

    async def test_z_last(memory_nats_client):
        await memory_nats_client.flush(timeout=5)
        await threads.deferToThread(lambda: None)  # starts the reactor's thread pool
"""


def test_mixed_session_with_trial_tests(pytester: pytest.Pytester) -> None:
    """pytest-twisted tests before trial TestCases in one session: all pass with the
    plugin (it hands the reactor back), and the run ends (the reactor's thread pool is
    stopped at the end: it once kept the process alive); without the plugin the trial
    tests fail."""
    pytester.makepyfile(test_mixed=MIXED)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=4)
    # What pytest-twisted alone does (the fixtures come from a conftest instead).
    pytester.makeconftest("""
        import pytest
        from txnats.testing import MemoryNats
        import txnats, pytest_twisted
        from twisted.internet import reactor

        @pytest.fixture
        def memory_nats_client():
            server = MemoryNats().start()
            nc = pytest_twisted.blockon(txnats.connect(reactor, server.url))
            yield nc
            pytest_twisted.blockon(nc.close())
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:txnats",
                                           timeout=120)
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1, outcomes


def test_plugin_imports_no_reactor() -> None:
    """Importing the plugin installs no reactor (pytest-twisted chooses it later)."""
    import subprocess

    code = textwrap.dedent("""
        import sys
        import txnats.testing.pytest_plugin
        assert "twisted.internet.reactor" not in sys.modules, "a reactor was installed"
    """)
    subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ))

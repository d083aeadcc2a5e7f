"""
Run a cluster of real ``nats-server`` processes for tests.

Like :class:`txnats.testing.NatsServer`, this module never touches the
Twisted reactor: :meth:`NatsCluster.start` and :meth:`NatsCluster.stop` block,
with deadlines, so they can be called from ``setUp``, ``setUpClass``, a pytest
fixture or a script.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any

from txnats.testing._server import READY_MARKER, NatsServer, ServerStartError

__all__ = ["ClusterNode", "NatsCluster"]

#: How many times :meth:`NatsCluster.start` picks fresh ports when one was taken.
_PORT_ATTEMPTS = 3

#: Seconds between two looks at a condition the server does not announce in
#: its log (route tables, interest); a new log line ends the wait early.
_POLL_INTERVAL = 0.05

#: Seconds one HTTP request to a monitoring endpoint may take at most.
_HTTP_TIMEOUT = 2.0

#: Logged once the route port is bound (after READY_MARKER).
_ROUTE_LISTENING = "Listening for route connections on "

#: Log fragment meaning some listener could not be bound.
_BIND_FAILURE = "address already in use"


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _free_ports(host: str, count: int) -> list[int]:
    """
    Ask the kernel for ``count`` distinct free TCP ports on ``host``, holding
    them all bound at once so that none is handed out twice, then release
    them. Another process may take one before a server binds it, which
    :meth:`NatsCluster.start` handles by retrying with fresh ports.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in sockets]
    except OSError as error:
        raise ServerStartError(f"Could not find free ports on {host!r}: {error}") from error
    finally:
        for sock in sockets:
            sock.close()


class _Deadline:
    """
    A point in time that bounded waits count down to.
    """

    def __init__(self, seconds: float, what: str) -> None:
        self.seconds = seconds
        self.what = what
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        return self._end - time.monotonic()

    def request_timeout(self) -> float:
        """The timeout for one monitoring request: what is left, at most ``_HTTP_TIMEOUT``."""
        return min(_HTTP_TIMEOUT, max(self.remaining(), 0.001))

    def check(self, detail: str) -> float:
        """
        :returns: the seconds left.
        :raises TimeoutError: if none are.
        """
        left = self.remaining()
        if left <= 0:
            raise TimeoutError(f"{self.what} did not happen within {self.seconds:g} s: {detail}")
        return left


class _LineSocket:
    """
    Read CRLF-terminated NATS control lines from a blocking socket, each read
    bounded by a deadline through the socket's timeout.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = b""

    def line(self, deadline: _Deadline) -> bytes:
        while b"\r\n" not in self._buffer:
            self._sock.settimeout(max(deadline.check("no complete line from the server"), 0.001))
            try:
                chunk = self._sock.recv(65536)
            except TimeoutError:
                continue  # deadline.check raises on the next pass
            if not chunk:
                raise ConnectionError(f"server closed the connection; unread: {self._buffer!r}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\r\n", 1)
        return line


def _parse_info(line: bytes) -> dict[str, Any] | None:
    if not line.startswith(b"INFO "):
        return None
    info: dict[str, Any] = json.loads(line[len(b"INFO ") :])
    return info


class ClusterNode(NatsServer):
    """
    One server of a :class:`NatsCluster`: a :class:`NatsServer` on fixed
    client, route and monitoring ports, so that :meth:`restart` (or
    :meth:`kill` then ``start``) brings it back where its peers and clients
    expect it.

    Everything :class:`NatsServer` offers works: ``url``, ``port``, ``stop()``,
    ``kill()`` (SIGKILL), ``pause()`` (SIGSTOP), ``resume()`` (SIGCONT),
    ``lame_duck()``, ``log_lines``, ``wait_for_log()``.
    """

    def __init__(
        self,
        cluster: NatsCluster,
        *,
        index: int,
        name: str,
        client_port: int,
        route_port: int,
        monitor_port: int,
        config: str,
        jetstream: bool,
        store_dir: str | None,
        binary: str | None,
        startup_timeout: float,
    ) -> None:
        super().__init__(
            jetstream=jetstream,
            config=config,
            host=cluster.host,
            port=client_port,
            binary=binary,
            store_dir=store_dir,
            startup_timeout=startup_timeout,
        )
        self._cluster = cluster
        self._index = index
        self._name = name
        self._route_port = route_port
        self._monitor_port = monitor_port
        self._config_text = config
        # nats-server says it is ready for clients before it binds the route port, and
        # exits if that fails (another process took the port since _free_ports): only
        # the route listener makes the start a success, so that a taken route port is
        # a failed start, which NatsCluster.start retries on fresh ports, and not a
        # node that dies just after start() returned.
        self._ready_markers = (READY_MARKER, _ROUTE_LISTENING)

    @property
    def index(self) -> int:
        """The position of this node in :attr:`NatsCluster.nodes`."""
        return self._index

    @property
    def name(self) -> str:
        """The node's ``server_name``, such as ``"txnats-1"``."""
        return self._name

    @property
    def route_port(self) -> int:
        """The port the node accepts route (cluster) connections on."""
        return self._route_port

    @property
    def route_url(self) -> str:
        """The route URL peers connect to, such as ``nats-route://127.0.0.1:6222``."""
        return f"nats-route://{_hostport(self.host, self._route_port)}"

    @property
    def monitor_port(self) -> int:
        """The port of the node's HTTP monitoring endpoint."""
        return self._monitor_port

    @property
    def monitor_url(self) -> str:
        """The base URL of the monitoring endpoint, such as ``http://127.0.0.1:8222``."""
        return f"http://{_hostport(self.host, self._monitor_port)}"

    @property
    def client_address(self) -> str:
        """``host:port`` as it appears in other nodes' ``connect_urls``."""
        return _hostport(self.host, self.port)

    @property
    def config_text(self) -> str:
        """The configuration file text the node runs with."""
        return self._config_text

    @property
    def live(self) -> bool:
        """Running, not paused and not in lame duck mode: serving clients."""
        return self.running and not self.paused and not self.in_lame_duck

    def monitor(self, endpoint: str, timeout: float = _HTTP_TIMEOUT, **params: Any) -> Any:
        """
        GET a monitoring endpoint and return its decoded JSON, for example
        ``node.monitor("routez")`` or ``node.monitor("subsz", subs=1)``.

        :raises OSError: if the request fails or takes longer than ``timeout``.
        """
        query = urllib.parse.urlencode(params)
        url = f"{self.monitor_url}/{endpoint}" + (f"?{query}" if query else "")
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return json.loads(response.read())

    def route_names(self, timeout: float = _HTTP_TIMEOUT) -> set[str]:
        """
        The ``server_name`` of each node this node has a route to now (from
        ``/routez``; nats-server pools several connections per peer).
        """
        routez = self.monitor("routez", timeout)
        return {route.get("remote_name", "") for route in routez.get("routes") or []} - {""}

    def info(self, timeout: float = _HTTP_TIMEOUT) -> dict[str, Any]:
        """
        Connect with a plain socket and return the ``INFO`` the node greets a
        new client with.
        """
        deadline = _Deadline(timeout, f"INFO from {self.name}")
        with socket.create_connection((self.host, self.port), timeout=timeout) as sock:
            line = _LineSocket(sock).line(deadline)
        info = _parse_info(line)
        if info is None:
            raise ConnectionError(f"{self.name} sent {line!r} instead of INFO")
        return info

    def restart(self, timeout: float | None = None) -> ClusterNode:
        """
        Stop the node if it runs (gracefully; :meth:`kill` first for a crash),
        start it again with the same ports, configuration and JetStream
        store, and block until the cluster has formed again around it (see
        :meth:`NatsCluster.wait_until_formed`).

        :param timeout: seconds to wait for the cluster; the cluster's
            ``startup_timeout`` by default.
        :returns: ``self``.
        """
        self.stop()
        self.start()
        self._cluster.wait_until_formed(timeout)
        return self

    def __repr__(self) -> str:
        state = "paused" if self.paused else "running" if self.running else "stopped"
        return f"<ClusterNode {self._name} {self.url} {state}>"

    def jetstream_leader(self, timeout: float = _HTTP_TIMEOUT) -> str:
        """
        The ``server_name`` of the JetStream meta leader this node knows (from
        ``/jsz``), or ``""`` if it knows none.

        :raises OSError: if the request fails or takes longer than ``timeout``.
        :raises ValueError: if the answer is not JSON.
        """
        jsz = self.monitor("jsz", timeout)
        leader: str = (jsz.get("meta_cluster") or {}).get("leader") or ""
        return leader

    def has_interest(self, subject: str, timeout: float = _HTTP_TIMEOUT) -> bool:
        """
        Whether a message published to ``subject`` on this node would go
        anywhere: to a local subscriber (``/subsz``) or over a route to a node
        that told this one of a matching subscription (``/routez``).

        :raises OSError: if a request fails or takes longer than ``timeout``.
        :raises ValueError: if an answer is not JSON.
        """
        subsz = self.monitor("subsz", timeout, subs=1, test=subject)
        if int(subsz.get("total", 0)) > 0:
            return True
        routez = self.monitor("routez", timeout, subs=1)
        for route in routez.get("routes") or []:
            for entry in route.get("subscriptions_list") or []:
                # A queue subscription is listed as "subject queue".
                if _subject_matches(str(entry).split(" ", 1)[0], subject):
                    return True
        return False


def _pause_briefly(node: NatsServer, seen: int, seconds: float) -> int:
    """
    Wait up to ``seconds``, less if ``node`` prints a line after the first ``seen``.

    :returns: how many lines it has printed now.
    """
    with contextlib.suppress(TimeoutError):
        node.wait_for_log("", seconds, since=seen)  # every line holds ""
    return len(node.log_lines)


def _check_alive(node: ClusterNode) -> None:
    """
    Raise :class:`ServerStartError` quoting the log if ``node`` has exited, as it
    does when its route or monitoring port cannot be bound (which it reports only
    after it says it is ready for clients).
    """
    if not node.running:
        tail = "\n".join(node.log_lines[-30:]) or "(the server printed nothing)"
        raise ServerStartError(f"{node.name} exited. Last log lines:\n{tail}")


def _wait_for_routes(node: ClusterNode, peers: set[str], deadline: _Deadline) -> None:
    """
    Block until ``node``'s route table names every server in ``peers``. Route
    connections are logged, so a new log line triggers a fresh look at ``/routez``;
    the short interval covers a route registered just after its log line.
    """
    seen = len(node.log_lines)
    names: set[str] = set()
    while True:
        _check_alive(node)
        try:
            names = node.route_names(deadline.request_timeout())
        except (OSError, ValueError):
            names = set()
        if peers <= names:
            return
        left = deadline.check(
            f"{node.name} has routes to {sorted(names)}, expected {sorted(peers)}"
        )
        seen = _pause_briefly(node, seen, min(left, _POLL_INTERVAL))


def _wait_for_connect_urls(node: ClusterNode, expected: set[str], deadline: _Deadline) -> None:
    """
    Block until the ``INFO`` ``node`` gives clients lists every address in
    ``expected`` in its ``connect_urls``.

    A first connection reads the greeting; if it is incomplete it asks for
    asynchronous ``INFO`` updates (``"protocol": 1``), which the server sends only
    after its first ``PONG``. A second, fresh greeting read after that ``PONG`` covers
    updates made in between, and from then on the first connection receives every
    change as it happens: no polling.
    """
    timeout = max(deadline.remaining(), 0.001)
    with socket.create_connection((node.host, node.port), timeout=timeout) as sock:
        lines = _LineSocket(sock)
        urls: list[str] = []

        def complete(line: bytes) -> bool:
            nonlocal urls
            info = _parse_info(line)
            if info is None:
                return False
            urls = list(info.get("connect_urls") or [])
            return expected <= set(urls)

        if complete(lines.line(deadline)):
            return
        sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"protocol":1}\r\nPING\r\n')
        while True:
            line = lines.line(deadline)
            if complete(line):
                return
            if line == b"PONG":
                break
        fresh = node.info(max(deadline.remaining(), 0.001))
        if expected <= set(fresh.get("connect_urls") or []):
            return
        while True:
            try:
                line = lines.line(deadline)
            except TimeoutError as error:
                raise TimeoutError(
                    f"{error}; {node.name} advertises connect_urls {urls}, "
                    f"expected {sorted(expected)}"
                ) from None
            if line == b"PING":
                sock.sendall(b"PONG\r\n")
            elif complete(line):
                return


def _leader_or_nothing(node: ClusterNode, deadline: _Deadline) -> str:
    """The JetStream meta leader ``node`` knows, or ``""`` if it does not say in time."""
    try:
        return node.jetstream_leader(deadline.request_timeout())
    except (OSError, ValueError):
        return ""


def _subject_matches(pattern: str, subject: str) -> bool:
    """
    Whether the subscription subject ``pattern`` (which may hold ``*`` and
    ``>`` wildcards) matches the literal ``subject``.
    """
    wanted = pattern.split(".")
    tokens = subject.split(".")
    for position, token in enumerate(wanted):
        if token == ">":
            return len(tokens) > position
        if position >= len(tokens) or (token != "*" and token != tokens[position]):
            return False
    return len(tokens) == len(wanted)


class NatsCluster:
    """
    ``n`` ``nats-server`` processes joined by routes into one cluster, on free
    loopback ports.

    Each node gets a configuration file naming it (``server_name``
    ``<cluster_name>-1``, ``-2``, ...), enabling HTTP monitoring, and listing
    every other node under ``cluster { routes }``. With ``jetstream=True`` each
    node also runs JetStream with its own store directory, kept across
    :meth:`ClusterNode.restart` and removed by :meth:`stop`.

    Use it around a test case::

        cluster = NatsCluster(3).start()
        self.addCleanup(cluster.stop)
        ... connect to cluster.urls ...

    or as a context manager.

    :param n: the number of nodes.
    :param jetstream: enable (clustered) JetStream.
    :param cluster_name: the cluster's name, also the prefix of node names.
    :param host: the address every node listens on (clients, routes,
        monitoring).
    :param startup_timeout: seconds :meth:`start` may take in all, and the
        default for :meth:`wait_until_formed`.
    :param config: extra configuration text added to every node's file, such
        as ``"ping_interval: \\"1s\\""`` or ``"lame_duck_duration: \\"5s\\""``.
    :param binary: the nats-server executable; see
        :func:`txnats.testing.find_nats_server`.
    """

    def __init__(
        self,
        n: int = 3,
        *,
        jetstream: bool = False,
        cluster_name: str = "txnats",
        host: str = "127.0.0.1",
        startup_timeout: float = 15.0,
        config: str = "",
        binary: str | None = None,
    ) -> None:
        if n < 1:
            raise ValueError(f"a cluster needs at least one node, not {n}")
        self._n = n
        self._jetstream = jetstream
        self._cluster_name = cluster_name
        self._host = host
        self._startup_timeout = startup_timeout
        self._extra_config = config
        self._binary = binary
        self._nodes: list[ClusterNode] = []
        self._tempdir: str | None = None

    # -- public surface ---------------------------------------------------

    @property
    def host(self) -> str:
        """The address the nodes listen on."""
        return self._host

    @property
    def name(self) -> str:
        """The cluster's name."""
        return self._cluster_name

    @property
    def nodes(self) -> list[ClusterNode]:
        """
        The nodes, in order (a copy of the list). Empty before :meth:`start`.
        """
        return list(self._nodes)

    @property
    def urls(self) -> list[str]:
        """The client URLs of all nodes, in node order."""
        return [node.url for node in self._nodes]

    def __getitem__(self, index: int) -> ClusterNode:
        return self._nodes[index]

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[ClusterNode]:
        return iter(list(self._nodes))

    def start(self) -> NatsCluster:
        """
        Start every node and block until the cluster has formed (see
        :meth:`wait_until_formed`), all within ``startup_timeout``.

        When a port turns out to be taken by another process, every node is
        stopped and the cluster is started again on fresh ports, up to three
        times in all.

        :returns: ``self``.
        :raises ServerStartError: if a node cannot start; its log is quoted.
        :raises TimeoutError: if the cluster does not form in time.
        """
        if any(node.running for node in self._nodes):
            raise ServerStartError(f"{self!r} is already running")
        deadline = _Deadline(self._startup_timeout, "cluster start-up")
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            self._discard()
            self._nodes = self._make_nodes()
            try:
                for node in self._nodes:
                    node.start()
                self._wait_until_formed(deadline)
                return self
            except ServerStartError as error:
                if _BIND_FAILURE in str(error) and attempt < _PORT_ATTEMPTS:
                    continue
                self._discard()
                raise
            except BaseException:
                self._discard()
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def wait_until_formed(self, timeout: float | None = None) -> None:
        """
        Block until every live node (running, not paused, not in lame duck
        mode) has a route to
        every other live node, advertises all of their client addresses in
        the ``connect_urls`` of the ``INFO`` it gives clients and, with
        JetStream, knows the meta group's leader.

        :meth:`start` and :meth:`ClusterNode.restart` call it. Call it yourself
        after ``node.start()`` or :meth:`ClusterNode.resume` when the test
        needs the cluster whole again.

        :param timeout: seconds to wait; ``startup_timeout`` by default.
        :raises TimeoutError: naming what was missing.
        """
        seconds = self._startup_timeout if timeout is None else timeout
        self._wait_until_formed(_Deadline(seconds, "cluster formation"))

    def wait_for_interest(self, subject: str, timeout: float = 5.0) -> None:
        """
        Block until every live node knows of a subscription matching
        ``subject`` (from ``/subsz``), so that a message published on any node
        reaches it. A client's ``flush`` only proves its own server has the
        subscription; the others learn of it over the routes a little later.

        :raises TimeoutError: naming the nodes that still lack it.
        """
        deadline = _Deadline(timeout, f"interest in {subject!r} on every node")
        for node in self._live():
            seen = len(node.log_lines)
            while True:
                try:
                    if node.has_interest(subject, deadline.request_timeout()):
                        break
                except (OSError, ValueError):
                    pass
                left = deadline.check(f"{node.name} has no subscription matching {subject!r}")
                seen = _pause_briefly(node, seen, min(left, _POLL_INTERVAL))

    def stop(self, timeout: float = 10.0) -> None:
        """
        Stop every node (SIGTERM to all at once, then SIGKILL any still
        running after ``timeout`` seconds) and remove the cluster's temporary
        files. Calling it again, or before :meth:`start`, does nothing.
        """
        # NatsServer.stop blocks until its process exits (or SIGKILLs it after
        # timeout): one thread per node lets the nodes shut down in parallel.
        if self._nodes:
            with ThreadPoolExecutor(len(self._nodes), "txnats-cluster-stop") as pool:
                for stopped in [pool.submit(node.stop, timeout) for node in self._nodes]:
                    stopped.result()
        self._remove_tempdir()

    def __enter__(self) -> NatsCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        running = sum(1 for node in self._nodes if node.running)
        return f"<NatsCluster {self._cluster_name!r} {running}/{self._n} nodes running>"

    # -- internals --------------------------------------------------------

    def _live(self) -> list[ClusterNode]:
        return [node for node in self._nodes if node.live]

    def _wait_until_formed(self, deadline: _Deadline) -> None:
        live = self._live()
        names = {node.name for node in live}
        for node in live:
            _wait_for_routes(node, names - {node.name}, deadline)
        for node in live:
            others = {peer.client_address for peer in live if peer is not node}
            while True:
                try:
                    _wait_for_connect_urls(node, others, deadline)
                    break
                except ConnectionError as error:
                    # Refused or closed: it may be exiting, or just busy.
                    _check_alive(node)
                    left = deadline.check(f"{node.name}: {error}")
                    _pause_briefly(node, len(node.log_lines), min(left, _POLL_INTERVAL))
        if self._jetstream and live:
            self._wait_for_jetstream(live, deadline)

    def _wait_for_jetstream(self, live: list[ClusterNode], deadline: _Deadline) -> None:
        """
        Block until every live node names the same live node as the leader
        of the JetStream meta group, without which stream and consumer
        requests fail. Elections are logged, so a new log line on the first
        node triggers a fresh look.
        """
        names = {node.name for node in live}
        watcher = live[0]
        seen = len(watcher.log_lines)
        while True:
            leaders = {node.name: _leader_or_nothing(node, deadline) for node in live}
            if len(set(leaders.values())) == 1 and set(leaders.values()) <= names:
                return
            left = deadline.check(f"the nodes know these JetStream meta leaders: {leaders}")
            seen = _pause_briefly(watcher, seen, min(left, _POLL_INTERVAL))

    def _ensure_tempdir(self) -> str:
        if self._tempdir is None:
            self._tempdir = tempfile.mkdtemp(prefix=f"txnats-cluster-{self._cluster_name}-")
        return self._tempdir

    def _remove_tempdir(self) -> None:
        if self._tempdir is not None:
            shutil.rmtree(self._tempdir, ignore_errors=True)
            self._tempdir = None

    def _discard(self) -> None:
        """Stop and forget the current nodes, keeping nothing on disk."""
        self.stop()
        self._nodes = []

    def _make_nodes(self) -> list[ClusterNode]:
        host = self._host
        ports = _free_ports(host, 3 * self._n)
        client_ports = ports[0 : self._n]
        route_ports = ports[self._n : 2 * self._n]
        monitor_ports = ports[2 * self._n :]
        names = [f"{self._cluster_name}-{i + 1}" for i in range(self._n)]
        nodes = []
        for i in range(self._n):
            store_dir = None
            if self._jetstream:
                store_dir = os.path.join(self._ensure_tempdir(), names[i], "jetstream")
                os.makedirs(store_dir, exist_ok=True)
            routes = [
                f"nats-route://{_hostport(host, route_ports[j])}" for j in range(self._n) if j != i
            ]
            config = _node_config(
                name=names[i],
                cluster_name=self._cluster_name,
                route_listen=_hostport(host, route_ports[i]),
                routes=routes,
                monitor=_hostport(host, monitor_ports[i]),
                extra=self._extra_config,
            )
            nodes.append(
                ClusterNode(
                    self,
                    index=i,
                    name=names[i],
                    client_port=client_ports[i],
                    route_port=route_ports[i],
                    monitor_port=monitor_ports[i],
                    config=config,
                    jetstream=self._jetstream,
                    store_dir=store_dir,
                    binary=self._binary,
                    startup_timeout=self._startup_timeout,
                )
            )
        return nodes


def _quoted(value: str) -> str:
    return json.dumps(value)


def _node_config(
    *,
    name: str,
    cluster_name: str,
    route_listen: str,
    routes: Iterable[str],
    monitor: str,
    extra: str,
) -> str:
    """
    The configuration file text for one node. The client address and port,
    and JetStream, are given on the command line by :class:`NatsServer`.
    """
    route_lines = "".join(f"    {_quoted(route)}\n" for route in routes)
    return (
        f"server_name: {_quoted(name)}\n"
        f"http: {_quoted(monitor)}\n"
        "cluster {\n"
        f"  name: {_quoted(cluster_name)}\n"
        f"  listen: {_quoted(route_listen)}\n"
        "  routes: [\n"
        f"{route_lines}"
        "  ]\n"
        "}\n"
        f"{extra}\n"
    )

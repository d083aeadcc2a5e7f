"""Server addresses: parsing ``nats://`` URLs and endpoint strings, redacting secrets."""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from twisted.logger import Logger

from txnats.errors import ConnectError

__all__ = ["DEFAULT_PORT", "MAX_DISCOVERED", "Server", "ServerPool", "parse_servers"]

DEFAULT_PORT = 4222
_SCHEMES = {"nats", "tls", "ws", "wss"}

#: The most servers learned from INFO ``connect_urls`` that one pool keeps.
#:
#: ``connect_urls`` lists the client addresses of the servers of the cluster the client
#: is connected to. A server listening on every interface announces one address per
#: global address of its host, so a cluster of a few dozen servers can announce a few
#: dozen to a hundred addresses; 128 leaves room for that. The limit is there for a
#: server that announces far more (by mistake or on purpose): each discovered server is
#: an object kept for the life of the client and a dial in every reconnect round, so an
#: unbounded list costs memory and makes failover walk longer. Servers given by the user
#: do not count and are never dropped.
MAX_DISCOVERED = 128

log = Logger()


@dataclass(eq=False)
class Server:
    """One server of the pool. ``repr`` and :attr:`redacted` never show credentials."""

    scheme: str
    host: str
    port: int
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    endpoint_description: str | None = None
    discovered: bool = False
    #: The name to verify with TLS when it differs from ``host`` (a discovered server
    #: known only by IP keeps the seed server's hostname).
    tls_hostname: str | None = None
    #: The HTTP path of a WebSocket server (``ws://host:port/path``).
    path: str = "/"
    #: Bookkeeping for the reconnect loop.
    attempts: int = 0
    last_attempt: float | None = None
    last_auth_error: str | None = field(default=None, repr=False)

    @property
    def redacted(self) -> str:
        """The URL with any password or token replaced by ``***``."""
        if self.endpoint_description is not None:
            return self.endpoint_description
        auth = ""
        if self.user is not None and self.password is not None:
            auth = f"{self.user}:***@"
        elif self.token is not None or self.user is not None:
            auth = "***@"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{auth}{host}:{self.port}"

    @property
    def hostport(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return self.redacted


def parse_server(text: str, *, discovered: bool = False) -> Server:
    """Parse one ``nats://[user[:pass]@]host[:port]`` URL, ``host:port`` or endpoint string.

    Strings that start with a Twisted endpoint type (``tcp:``, ``unix:``, ``ssl:``...) and
    are not URLs are taken as client endpoint descriptions.
    """
    text = text.strip()
    if not text:
        raise ConnectError("empty server address")
    if "://" not in text:
        head = text.split(":", 1)[0]
        if ":" in text and head.isalpha() and head not in ("localhost",) and "=" in text:
            return Server("nats", "", 0, endpoint_description=text, discovered=discovered)
        text = "nats://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as e:
        raise ConnectError(f"invalid server URL: {e}") from None
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise ConnectError(f"unsupported scheme {scheme!r} in server URL")
    host = parts.hostname
    if not host:
        raise ConnectError("server URL has no host")
    if port is None:
        port = {"ws": 80, "wss": 443}.get(scheme, DEFAULT_PORT)
    user = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    token = None
    if user is not None and password is None:
        # nats.go and nats-py: a user without a password is a token.
        token, user = user, None
    server = Server(scheme, host, port, user, password, token, discovered=discovered)
    if parts.path:
        server.path = parts.path
    return server


def parse_servers(servers: str | Sequence[str]) -> list[Server]:
    """Parse a list, or a comma-separated string, of server addresses."""
    if isinstance(servers, str):
        items: Iterable[str] = [s for s in servers.split(",") if s.strip()]
    else:
        items = servers
    parsed = [parse_server(s) for s in items]
    if not parsed:
        raise ConnectError("no servers given")
    return parsed


class ServerPool:
    """The servers a client may connect to, in the order they will be tried."""

    def __init__(self, servers: list[Server], *, randomize: bool = True,
                 rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self.servers = list(servers)
        if randomize:
            self._rng.shuffle(self.servers)
        self.randomize = randomize
        # Discovered servers -> the connect_urls string each was announced as.
        self._announced_as: dict[Server, str] = {}

    def __iter__(self) -> Iterator[Server]:
        return iter(list(self.servers))

    def __len__(self) -> int:
        return len(self.servers)

    def next_server(self) -> Server:
        """Take the head of the pool and move it to the back."""
        server = self.servers.pop(0)
        self.servers.append(server)
        return server

    def add_discovered(self, hostports: Iterable[str], template: Server) -> list[Server]:
        """Take the ``connect_urls`` of an INFO as the cluster's current view.

        ``template`` is the server the INFO came from (the current one): new servers get
        its scheme, and its credentials and TLS hostname where they have none of their
        own. Returns the servers that were new, in the order they were added.

        - Discovered servers that ``hostports`` no longer lists are removed, so that a
          failover does not dial servers the cluster has forgotten. Servers the user
          gave and ``template`` itself are kept whether listed or not; an empty
          ``hostports`` (a server that announces nothing) removes nothing.
        - New servers are appended behind the others, shuffled unless the pool was
          made with ``randomize=False``. The order of the servers kept does not change.
        - At most :data:`MAX_DISCOVERED` discovered servers are kept. Announced servers
          beyond that are ignored: a random choice of them when the pool randomizes,
          the ones listed last otherwise.

        :attr:`servers` is changed in place: it stays the same list object.
        """
        announced = dict.fromkeys(hostports)
        if not announced:
            return []
        was = self._announced_as
        # The address each discovered server was announced as (the server repeats the
        # same strings in every INFO), else its parsed host:port.
        keep = [
            s
            for s in self.servers
            if not s.discovered or s is template or was.get(s, s.hostport) in announced
        ]
        self.servers[:] = keep
        self._announced_as = {s: was[s] for s in keep if s in was}
        present = {s.hostport for s in keep}
        present.update(self._announced_as.values())
        candidates = [hp for hp in announced if hp not in present]
        room = MAX_DISCOVERED - sum(1 for s in keep if s.discovered)
        if self.randomize and len(candidates) > room:
            order: Iterable[str] = _shuffled(candidates, self._rng)
        else:
            order = candidates
        new: list[Server] = []
        examined = 0
        for hp in order:
            if len(new) >= room:
                break
            examined += 1
            try:
                s = parse_server(f"{template.scheme}://{hp}", discovered=True)
            except ConnectError:
                continue
            if s.hostport in present:
                continue
            if _is_ip(s.host) and not _is_ip(template.host):
                s.tls_hostname = template.tls_hostname or template.host
            if s.user is None and s.token is None:
                # As nats.go does: the URL credentials of the server it was learned from.
                s.user, s.password, s.token = template.user, template.password, template.token
            present.add(s.hostport)
            self._announced_as[s] = hp
            new.append(s)
        if examined < len(candidates):
            log.debug(
                "Ignored {ignored} of the addresses {server} announced: the pool keeps "
                "at most {limit} discovered servers",
                server=template.redacted,
                ignored=len(candidates) - examined,
                limit=MAX_DISCOVERED,
            )
        if self.randomize:
            self._rng.shuffle(new)
        self.servers.extend(new)
        return new


def _shuffled(items: Sequence[str], rng: random.Random) -> Iterator[str]:
    """Yield ``items`` in a random order, doing only the work for what is taken."""
    pool = list(items)
    for i in range(len(pool)):
        j = rng.randrange(i, len(pool))
        pool[i], pool[j] = pool[j], pool[i]
        yield pool[i]


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True

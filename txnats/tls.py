"""TLS options: Twisted's own TLS (``optionsForClientTLS``), hostname verification always on."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from twisted.python.failure import Failure

from txnats.errors import TLSError

__all__ = ["TLSConfig", "is_tls_failure"]

_PEM_CERT = re.compile(
    rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL
)


def _shown(path: str | None) -> str:
    """``repr(path)``, unless it does not look like a path (PEM content given instead)."""
    if path is None or not ("\n" in path or "-----" in path or len(path) > 1024):
        return repr(path)
    return "(not shown)"


def _read_bytes(path: str, what: str, secret: bool = False) -> bytes:
    """Read ``path``, the ``what`` of the TLS options.

    :raises TLSError: it cannot be read. The message shows the path unless it is the
        private key's, or does not look like a path (PEM content given instead of one).
    """
    try:
        with open(path, "rb") as f:
            return f.read()
    except (OSError, ValueError) as e:  # (ValueError: a NUL in the "path")
        reason = e.strerror if isinstance(e, OSError) and e.strerror else type(e).__name__
        shown = "(not shown)" if secret else _shown(path)
        raise TLSError(f"cannot read {what} {shown}: {reason}") from None


@dataclass(frozen=True)
class TLSConfig:
    """How to make TLS connections.

    ``ca_file`` (PEM, one or more certificates) replaces the platform's trust roots;
    ``cert_file`` and ``key_file`` give a client certificate (mutual TLS); ``hostname``
    overrides the name verified (and sent as SNI); ``handshake_first`` starts TLS before
    the server's INFO (servers with ``handshake_first``). ``creator`` is a ready
    ``IOpenSSLClientConnectionCreator`` (e.g. from ``optionsForClientTLS``) used as is.
    ``cert_cb() -> (certificate PEM, key PEM)`` and ``ca_cb() -> CA PEM`` are called on
    each connection attempt instead of reading ``cert_file``/``key_file`` and
    ``ca_file``, so that certificates which rotate apply at the next connection.
    """

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = field(default=None, repr=False)
    hostname: str | None = None
    handshake_first: bool = False
    creator: Any = None
    cert_cb: Callable[[], tuple[bytes, bytes]] | None = field(default=None, repr=False)
    ca_cb: Callable[[], bytes] | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return (
            f"TLSConfig(ca_file={_shown(self.ca_file)}, cert_file={_shown(self.cert_file)}, "
            f"key_file={'(set)' if self.key_file else None}, hostname={self.hostname!r}, "
            f"handshake_first={self.handshake_first!r}, creator={self.creator!r})"
        )

    def client_creator(self, hostname: str) -> Any:
        """An ``IOpenSSLClientConnectionCreator`` verifying ``hostname``.

        :raises TLSError: a file that cannot be read or parsed, a callback that fails
            or answers something else than PEM bytes.
        """
        if self.creator is not None:
            return self.creator
        from twisted.internet import ssl

        name = self.hostname or hostname
        try:
            return ssl.optionsForClientTLS(
                name, trustRoot=self._trust(ssl), clientCertificate=self._client_cert(ssl)
            )
        except TLSError:
            raise
        except Exception as e:
            raise TLSError(f"cannot set up TLS for {name!r}: {type(e).__name__}") from None

    def _trust(self, ssl: Any) -> Any:
        """The trust roots: the CA certificates given, or None for the platform's."""
        if self.ca_cb is not None:
            ca = self.ca_cb()
            if not isinstance(ca, bytes):
                raise TLSError("tls_ca_cb must return the CA certificates' PEM, as bytes")
        elif self.ca_file is not None:
            ca = _read_bytes(self.ca_file, "CA file")
        else:
            return None
        pems = _PEM_CERT.findall(ca)
        if not pems:
            raise TLSError("no certificate in the CA certificates given (ca_file, tls_ca_cb)")
        try:
            certs = [ssl.Certificate.loadPEM(p) for p in pems]
        except Exception as e:
            raise TLSError(f"bad CA certificate: {type(e).__name__}") from None
        return ssl.trustRootFromCertificates(certs)

    def _client_cert(self, ssl: Any) -> Any:
        """The client certificate with its key (mutual TLS), or None."""
        if self.cert_cb is not None:
            pair = self.cert_cb()
            if not (isinstance(pair, tuple) and len(pair) == 2
                    and all(isinstance(p, bytes) for p in pair)):
                raise TLSError("tls_cert_cb must return (certificate PEM, key PEM), two bytes")
            cert, key = pair
        elif self.cert_file is not None:
            cert = _read_bytes(self.cert_file, "certificate file")
            key = _read_bytes(self.key_file, "key file", secret=True) if self.key_file else cert
        else:
            return None
        try:
            return ssl.PrivateCertificate.loadPEM(key + b"\n" + cert)
        except Exception as e:
            raise TLSError(f"bad client certificate or key: {type(e).__name__}") from None


def is_tls_failure(reason: Failure) -> bool:
    """True when a connection ended because of TLS (handshake or verification)."""
    try:
        from OpenSSL import SSL
    except ImportError:  # pragma: no cover
        return False
    value = reason.value
    if isinstance(value, SSL.Error):
        return True
    name = type(value).__name__
    return "Verification" in name or "Certificate" in name

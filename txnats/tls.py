"""TLS options: Twisted's own TLS (``optionsForClientTLS``), hostname verification always on."""

from __future__ import annotations

import re
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
    """

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = field(default=None, repr=False)
    hostname: str | None = None
    handshake_first: bool = False
    creator: Any = None

    def __repr__(self) -> str:
        return (
            f"TLSConfig(ca_file={_shown(self.ca_file)}, cert_file={_shown(self.cert_file)}, "
            f"key_file={'(set)' if self.key_file else None}, hostname={self.hostname!r}, "
            f"handshake_first={self.handshake_first!r}, creator={self.creator!r})"
        )

    def client_creator(self, hostname: str) -> Any:
        """An ``IOpenSSLClientConnectionCreator`` verifying ``hostname``."""
        if self.creator is not None:
            return self.creator
        from twisted.internet import ssl

        name = self.hostname or hostname
        trust: Any = None
        if self.ca_file is not None:
            pems = _PEM_CERT.findall(_read_bytes(self.ca_file, "CA file"))
            if not pems:
                raise TLSError("no certificate in the CA file (ca_file)")
            try:
                certs = [ssl.Certificate.loadPEM(p) for p in pems]
            except Exception as e:
                raise TLSError(f"bad CA file (ca_file): {type(e).__name__}") from None
            trust = ssl.trustRootFromCertificates(certs)  # type: ignore[no-untyped-call]
        client_cert: Any = None
        if self.cert_file is not None:
            cert = _read_bytes(self.cert_file, "certificate file")
            key = _read_bytes(self.key_file, "key file", secret=True) if self.key_file else cert
            try:
                client_cert = ssl.PrivateCertificate.loadPEM(  # type: ignore[no-untyped-call]
                    key + b"\n" + cert
                )
            except Exception as e:
                raise TLSError(f"bad client certificate or key: {type(e).__name__}") from None
        try:
            return ssl.optionsForClientTLS(name, trustRoot=trust, clientCertificate=client_cert)
        except Exception as e:
            raise TLSError(f"cannot set up TLS for {name!r}: {e}") from None


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

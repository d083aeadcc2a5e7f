"""TLS: a server certificate checked against a CA, a client certificate, and a
``tls://`` URL that refuses a server without TLS.

Run it from the project root (it makes throw-away certificates with ``trustme``,
``pip install trustme``, and starts nats-servers of its own)::

    python examples/tls.py

Hostname verification is always on: ``tls_ca_file`` replaces the platform's trust
roots, ``tls_cert_file``/``tls_key_file`` present a client certificate, and
``tls_hostname`` names the host to verify when the URL's is not it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import trustme
from twisted.internet import task

import txnats
from txnats.errors import TLSError
from txnats.testing import NatsServer


def certificates(directory: Path) -> dict[str, str]:
    """A CA, a server certificate for localhost and a client certificate, as files."""
    ca = trustme.CA()
    server, client = ca.issue_cert("localhost", "127.0.0.1"), ca.issue_cert("app.example")
    files = {
        "ca": ca.cert_pem.bytes(),
        "server": b"".join(p.bytes() for p in server.cert_chain_pems),
        "server_key": server.private_key_pem.bytes(),
        "client": b"".join(p.bytes() for p in client.cert_chain_pems),
        "client_key": client.private_key_pem.bytes(),
    }
    paths = {}
    for name, data in files.items():
        paths[name] = str(directory / f"{name}.pem")
        Path(paths[name]).write_bytes(data)
    return paths


async def main(reactor, tls_url, plain_url, pem):
    nc = await txnats.connect(
        reactor, tls_url,
        tls_ca_file=pem["ca"],                                   # trust this CA only
        tls_cert_file=pem["client"], tls_key_file=pem["client_key"],  # who we are
    )
    print(f"connected over TLS: {nc.server_info.get('tls_required')}")
    await nc.close()

    try:  # a tls:// URL against a server that offers no TLS: nothing sent in plain text
        await txnats.connect(reactor, plain_url.replace("nats://", "tls://"),
                             tls_ca_file=pem["ca"], allow_reconnect=False)
    except TLSError:
        print("tls:// to a plaintext server: TLSError")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        pem = certificates(Path(tmp))
        config = (f'tls {{ cert_file: "{pem["server"]}", key_file: "{pem["server_key"]}", '
                  f'ca_file: "{pem["ca"]}", verify: true }}')
        with NatsServer(config=config) as secure, NatsServer() as plain:
            task.react(main, [secure.url.replace("nats://", "tls://"), plain.url, pem])

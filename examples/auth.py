"""Authentication: user and password, tokens, and what a refusal looks like.

Run it from the project root (it starts two nats-servers of its own)::

    python examples/auth.py

Credentials go in the URL or in options; neither ever appears in a log line, an error
or ``connected_url``. NKeys, ``.creds`` files and JWT callbacks are options too
(``nkeys_seed_file=``, ``user_credentials=``, ``user_jwt_cb=`` with ``signature_cb=``).
"""

from __future__ import annotations

from twisted.internet import task

import txnats
from txnats.errors import AuthorizationError
from txnats.testing import NatsServer

USERS = "authorization { users = [ {user: alice, password: s3cret} ] }"
TOKEN = "authorization { token: t0ken }"


async def main(reactor, users_url, token_url):
    host = users_url.removeprefix("nats://")
    nc = await txnats.connect(reactor, f"nats://alice:s3cret@{host}")   # in the URL
    print(f"user/password in the URL: connected to {nc.connected_url}")
    await nc.close()
    nc = await txnats.connect(reactor, users_url, user="alice", password="s3cret")
    print("user/password as options: connected")
    await nc.close()

    nc = await txnats.connect(reactor, token_url, token="t0ken")
    print("token: connected")
    await nc.close()
    nc = await txnats.connect(reactor, token_url, token_handler=lambda: "t0ken")
    print("token_handler (called on every connect): connected")
    await nc.close()

    try:
        await txnats.connect(reactor, users_url, user="alice", password="wrong",
                             allow_reconnect=False)
    except AuthorizationError as e:
        print(f"wrong password: {type(e).__name__}, secret shown: {'wrong' in str(e)}")


if __name__ == "__main__":
    with NatsServer(config=USERS) as users, NatsServer(config=TOKEN) as token:
        task.react(main, [users.url, token.url])

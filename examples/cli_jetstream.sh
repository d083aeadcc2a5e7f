#!/bin/sh
# JetStream on the command line: a server with JetStream, a context naming it, then a
# stream and a consumer, a key-value bucket and an object store, each used with the
# nats CLI's verbs and flags. Run it from anywhere txnats is installed (a test runs it):
#
#     sh examples/cli_jetstream.sh       # PORT=4333 sh examples/cli_jetstream.sh
#
# It adds and selects a context named "tour", and removes it at the end, in
# $XDG_CONFIG_HOME/nats; when XDG_CONFIG_HOME is not set, in a temporary folder of its
# own, so that your contexts (in ~/.config/nats) and your selection are left alone.
set -eu
PORT=${PORT:-4222}
work=$(mktemp -d)
if [ -z "${XDG_CONFIG_HOME:-}" ]; then
    export XDG_CONFIG_HOME="$work/config"
fi
unset NATS_URL NATS_CONTEXT                   # either would win over the selected context

txnats server --jetstream --port "$PORT" &    # an embedded nats-server, JetStream on
server=$!
trap 'kill "$server" 2>/dev/null; rm -rf "$work"' EXIT

# A context: connection settings kept under a name, in the files the nats CLI reads.
txnats context add tour -s "nats://127.0.0.1:$PORT" --description "the JetStream tour" \
    --select
until txnats account info >/dev/null 2>&1; do sleep 0.1; done   # connects as "tour"
txnats context ls

# A stream, two messages in it, read back three ways.
txnats stream add ORDERS --subjects 'orders.>' --max-age 7d --storage file >/dev/null
txnats pub orders.new '{"id": 1}'
txnats pub orders.new '{"id": 2}' -H X-Trace:7
txnats stream view ORDERS --since 1h --raw
txnats stream get ORDERS -S orders.new --json
txnats stream info ORDERS --state

# A pull consumer: take both messages, acknowledging each.
txnats consumer add ORDERS WORKER --filter orders.new --max-deliver 5 >/dev/null
txnats consumer next ORDERS WORKER --count 2 --json
txnats consumer ls ORDERS --names

# A key-value bucket: put, get, history, a watch that stops after two entries.
txnats kv add CONFIG --history 5 >/dev/null
txnats kv put CONFIG db.url postgres://db && txnats kv get CONFIG db.url --raw; echo
printf postgres://db2 | txnats kv put CONFIG db.url   # the value from stdin
txnats kv history CONFIG db.url
txnats kv watch CONFIG 'db.>' --count 1 --json
txnats kv del CONFIG db.url -f                # -f: nobody at a terminal to ask

# An object store: a file in, the same bytes out through a pipe.
printf 'hello\n' > "$work/notes.txt"
tar cf "$work/backup.tar" -C "$work" notes.txt
txnats obj add FILES >/dev/null && txnats obj put FILES "$work/backup.tar"
txnats obj get FILES backup.tar -O - | tar t
txnats obj ls FILES --names

# Flags win over the context; --no-context uses none.
txnats stream ls --names --no-context -s "nats://127.0.0.1:$PORT"
txnats stream rm ORDERS -f
txnats context rm tour -f                     # -f: it is the selected one

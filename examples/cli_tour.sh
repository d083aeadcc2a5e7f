#!/bin/sh
# The txnats command line, end to end: a server, a subscriber, a replier, requests and
# two short benchmarks. Run it from anywhere txnats is installed (a test runs it):
#
#     sh examples/cli_tour.sh            # PORT=4333 sh examples/cli_tour.sh for another port
set -eu
PORT=${PORT:-4222}
export NATS_URL="nats://127.0.0.1:$PORT"      # every command's default -s/--server

txnats server --port "$PORT" &                # an embedded nats-server
server=$!
trap 'kill "$server" 2>/dev/null' EXIT
until txnats pub probe x 2>/dev/null; do sleep 0.1; done

txnats reply svc.echo --count 1 &             # echoes one request, then exits
until txnats req svc.echo hi --timeout 1; do sleep 0.1; done

txnats sub 'greet.*' --count 2 &              # prints two messages, then exits
sub=$!
while kill -0 "$sub" 2>/dev/null; do
    txnats pub greet.joe hello -H X-Trace:1 --count 2
    sleep 0.2
done

txnats bench pub --msgs 100000 --size 16 --no-progress
txnats bench req --duration 1 --inflight 10 --no-progress

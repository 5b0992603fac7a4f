#!/usr/bin/env bash
# Two replicas of one gateway on one Redis, behind a load balancer, on this
# machine (see docs/replicas.md):
#
#   examples/replicas/run.sh           # start everything; Ctrl-C stops it
#   examples/replicas/run.sh --check   # start, check that the replicas share
#                                      # keys and credits, then stop
#
# Clients call the load balancer on :8080; the replicas listen on :8081 and
# :8082, their admin endpoints (and operator API) on localhost:2019 and
# localhost:2020. Any port moves with the environment: TOLLGATE_HTTP_PORT,
# REPLICA_1_PORT, REPLICA_2_PORT, ADMIN_1_PORT, ADMIN_2_PORT, LB_ADMIN_PORT,
# TOLLGATE_MOCK_PORT, REDIS_PORT. TOLLGATE_REDIS=host:port uses a running
# Redis (appendonly yes, appendfsync always) instead of starting one.
# CADDY names a built gateway; unset, ./cmd/caddy is built.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PORT=${TOLLGATE_HTTP_PORT:-8080}
R1=${REPLICA_1_PORT:-8081} R2=${REPLICA_2_PORT:-8082}
A1=${ADMIN_1_PORT:-2019} A2=${ADMIN_2_PORT:-2020} ALB=${LB_ADMIN_PORT:-2018}
MOCK=${TOLLGATE_MOCK_PORT:-8090}
REDIS_PORT=${REDIS_PORT:-6379}
REDIS=${TOLLGATE_REDIS:-}
CHECK=
[[ ${1:-} == --check ]] && CHECK=1

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-replicas.XXXXXX")
PIDS=()
cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
die() { echo "replicas: $*" >&2; exit 1; }
command -v curl >/dev/null || die "curl is required"

CADDY=${CADDY:-}
if [[ -z $CADDY ]]; then
	echo "replicas: building ./cmd/caddy" >&2
	CADDY=$WORK/caddy
	(cd "$ROOT" && go build -o "$CADDY" ./cmd/caddy) || die "build failed"
fi

if [[ -z $REDIS ]]; then
	command -v redis-server >/dev/null || die "redis-server is not installed (or set TOLLGATE_REDIS)"
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$WORK" --save '' \
		--appendonly yes --appendfsync always --loglevel warning >"$WORK/redis.log" 2>&1 &
	PIDS+=($!)
	REDIS=127.0.0.1:$REDIS_PORT
fi

run() { # name config env...
	local name=$1 config=$2
	shift 2
	env HOME="$WORK/$name" XDG_DATA_HOME="$WORK/$name" XDG_CONFIG_HOME="$WORK/$name" "$@" \
		"$CADDY" run --config "$config" --adapter caddyfile >"$WORK/$name.log" 2>&1 &
	PIDS+=($!)
}
run lb "$HERE/lb.Caddyfile" CADDY_ADMIN=localhost:$ALB TOLLGATE_HTTP_PORT=$PORT \
	TOLLGATE_REPLICA_1=127.0.0.1:$R1 TOLLGATE_REPLICA_2=127.0.0.1:$R2 TOLLGATE_MOCK_PORT=$MOCK
for i in 1 2; do
	port=R$i admin=A$i
	run "replica-$i" "$HERE/Caddyfile" CADDY_ADMIN=localhost:${!admin} TOLLGATE_REPLICA_PORT=${!port} \
		TOLLGATE_REDIS="$REDIS" TOLLGATE_MOCK_PORT=$MOCK
done

ready() { # url name
	local _
	for _ in $(seq 1 300); do
		curl -sf -o /dev/null --max-time 1 "$1" && return 0
		sleep 0.1
	done
	die "$2 did not start: $(tail -5 "$WORK/$2.log")"
}
ready "http://127.0.0.1:$R1/api/v1/models" replica-1
ready "http://127.0.0.1:$R2/api/v1/models" replica-2
ready "http://127.0.0.1:$PORT/api/v1/models" lb
echo "replicas: load balancer on :$PORT, replicas on :$R1 and :$R2 (admin localhost:$A1, localhost:$A2), redis $REDIS" >&2

# An account with 10 credits and a management key, created at replica 1's
# operator API; an API key created through the load balancer.
field() { grep -o "\"$1\":\"[^\"]*\"" | head -1 | cut -d'"' -f4; }
op() { curl -sf -X POST "http://localhost:$A1/tollgate$1" -H 'Content-Type: application/json' -d "$2"; }
ACCOUNT=$(op /accounts '{"name":"Acme","type":"organization"}' | field id)
[[ -n $ACCOUNT ]] || die "could not create an account"
op "/accounts/$ACCOUNT/credits" '{"amount":"10"}' >/dev/null
MGMT=$(op "/accounts/$ACCOUNT/management-keys" '{"name":"ops"}' | field key)
KEY=$(curl -sf "http://127.0.0.1:$PORT/api/v1/keys" -H "Authorization: Bearer $MGMT" \
	-H 'Content-Type: application/json' -d '{"name":"customer-1","limit":1}' | field key)
[[ $KEY == sk-* ]] || die "could not create an API key"
echo "replicas: account $ACCOUNT, API key $KEY" >&2

chat() { # port
	curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/api/v1/chat/completions" \
		-H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
		-d '{"model":"tollgate-mock","messages":[{"role":"user","content":"Hello"}],"max_tokens":16}'
}
if [[ -z $CHECK ]]; then
	echo "replicas: try: curl localhost:$PORT/api/v1/chat/completions -H 'Authorization: Bearer $KEY' -d '{\"model\":\"tollgate-mock\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]}'" >&2
	echo "replicas: running; Ctrl-C stops everything" >&2
	wait
	exit 0
fi

# --check: the key works at both replicas and through the load balancer,
# and every charge shows at both replicas.
for p in "$R1" "$R2" "$PORT" "$PORT"; do
	code=
	for _ in $(seq 1 100); do # a replica sees the key within milliseconds
		code=$(chat "$p")
		[[ $code == 200 ]] && break
		sleep 0.02
	done
	[[ $code == 200 ]] || die "a chat completion on :$p answered $code"
done
usage() { curl -sf "http://127.0.0.1:$1/api/v1/key" -H "Authorization: Bearer $KEY" | grep -o '"usage":[0-9.e-]*' | head -1 | cut -d: -f2; }
for _ in $(seq 1 100); do
	u1=$(usage "$R1") u2=$(usage "$R2")
	[[ -n $u1 && $u1 == "$u2" && $u1 != 0 ]] && break
	sleep 0.02
done
[[ -n $u1 && $u1 == "$u2" && $u1 != 0 ]] || die "the replicas disagree on the key's usage: $u1 and $u2"
echo "replicas: check passed: 4 requests on both replicas, usage $u1 at each" >&2

#!/usr/bin/env bash
# Tollgate scale benchmark: a gateway on Badger holding N API keys (10 per
# account, one account with BIG keys). For each N it fills a fresh data
# directory (bench/scale populate, the storage package with the gateway
# stopped), starts Caddy on it and measures: the time from start to the
# first 200 of an inference request, resident memory, GET /api/v1/keys of
# a 10-key and of the big account, the gateway's CPU per inference request
# under wrk over 1,000 keys spread over the accounts (and the GC's share of
# the process's time, from GODEBUG=gctrace), a restart to the first 200
# after a clean stop (the key table's snapshot) and one after a kill -9
# (the snapshot and the key records written since), each also as the
# process's CPU seconds at its first 200 (cpu s: start/restart/crash).
#
# With SCALE_PAIRS=P it then starts the smallest and the largest size's
# gateways at once and loads them in turn, P pairs of SCALE_PAIR_DURATION
# (8) s each: the ratio of their CPU per request, pair by pair, and its
# median. Runs minutes apart on a shared machine differ more than the two
# sizes do; loaded in turn, both meet the same neighbours.
#
#   bench/scale.sh                   # N = 10000 100000
#   SCALE_SIZES="10000 1000000" bench/scale.sh
#   SCALE_SIZES="10000 1000000" SCALE_PAIRS=10 bench/scale.sh
set -euo pipefail

SIZES=${SCALE_SIZES:-10000 100000}
BIG=${SCALE_BIG:-10000}
DURATION=${SCALE_DURATION:-10}      # seconds of measured load
CONNECTIONS=${SCALE_CONNECTIONS:-32}
PAIRS=${SCALE_PAIRS:-0}             # alternating pairs of the smallest and largest size
PAIR_DURATION=${SCALE_PAIR_DURATION:-8}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-scale.XXXXXX")
PIDS=()
log() { printf '%s\n' "$*" >&2; }
die() { log "scale: $*"; exit 2; }
cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
	[[ -n ${SCALE_KEEP:-} ]] && log "scale: kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT
command -v wrk >/dev/null || die "wrk is required (apt-get install wrk)"

(cd "$ROOT" && go build -o "$WORK/caddy" ./cmd/caddy && go build -o "$WORK/scale" ./bench/scale) || die "build failed"
port() { local p; while :; do p=$((20000 + RANDOM % 12000)); (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }; done; }
UP=$(port) UP_ADMIN=$(port) GW=$(port) GW_ADMIN=$(port)
globals() { printf '\tadmin 127.0.0.1:%s\n\tpersist_config off\n\tskip_install_trust\n\tauto_https off\n' "$1"; }
cat >"$WORK/upstream.caddyfile" <<EOF
{
$(globals "$UP_ADMIN")
}
http://:$UP {
	bind 127.0.0.1
	tollgate_mock_provider {
		latency 0ms
	}
}
EOF
start() { # name config -> LAST_PID
	mkdir -p "$WORK/home"
	HOME=$WORK/home XDG_DATA_HOME=$WORK/home XDG_CONFIG_HOME=$WORK/home GODEBUG=gctrace=1 \
		"$WORK/caddy" run --config "$2" --adapter caddyfile >"$WORK/$1.log" 2>&1 &
	LAST_PID=$!
	PIDS+=("$LAST_PID")
}
start upstream "$WORK/upstream.caddyfile"
for _ in $(seq 1 200); do curl -s -o /dev/null "http://127.0.0.1:$UP/" && break; sleep 0.05; done

gwconf() { # data_dir admin_port port -> a gateway's Caddyfile
	cat <<EOF
{
$(globals "$2")
	tollgate {
		data_dir $1
		model tollgate-mock {
			pricing {
				prompt 0.000001
				completion 0.000002
			}
			provider mock http://127.0.0.1:$UP/v1 {
				api_key mock
			}
		}
	}
}
http://:$3 {
	bind 127.0.0.1
	tollgate
}
EOF
}

BODY='{"model":"tollgate-mock","messages":[{"role":"user","content":"Write one sentence about the sea, please."}],"max_tokens":64}'
TCK=$(getconf CLK_TCK)
cpu_ticks() { local s; s=$(<"/proc/$1/stat"); s=${s##*) }; awk '{print $12 + $13}' <<<"$s"; }
rss_mb() { awk '/VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }
firstkey() { # size -> the first of its sample's keys
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["keys"][0])' "$WORK/sample-$1.json"
}
first200() { # key -> seconds from now until an inference request answers 200
	local t0 code
	t0=$(date +%s.%N)
	while :; do
		code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$GW/api/v1/chat/completions" \
			-H "Authorization: Bearer $1" -H 'Content-Type: application/json' -d "$BODY" || true)
		[[ $code == 200 ]] && break
		sleep 0.01
	done
	awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}'
}
# cpu_s PID: the process's CPU seconds so far (user + system): the start's
# cost on a machine whose other work makes wall times swing.
cpu_s() { awk -v t="$(cpu_ticks "$1")" -v hz="$TCK" 'BEGIN {printf "%.2f", t / hz}'; }
gc_pct() { grep -o '^gc [0-9]* @[0-9.]*s [0-9]*%' "$1" | tail -1 | awk '{print $4}'; }

printf '%-8s %9s %9s %9s %9s %10s %10s %9s %8s %10s %10s %10s\n' keys "start s" "rss MB" "list10 ms" "listbig ms" "req/s" "gw µs/req" "gc %" "rss2 MB" "restart s" "crash s" "cpu s"
for N in $SIZES; do
	DATA=$WORK/data-$N
	"$WORK/scale" populate -dir "$DATA" -keys "$N" -big "$BIG" -out "$WORK/sample-$N.json" >&2
	python3 - "$WORK/sample-$N.json" "$BODY" >"$WORK/post-$N.lua" <<'PY'
import json, sys
keys = json.load(open(sys.argv[1]))["keys"]
print("local keys = {" + ",".join('"%s"' % k for k in keys) + "}")
print('local body = [[%s]]' % sys.argv[2])
print('request = function() return wrk.format("POST", nil, {["Authorization"] = "Bearer " .. keys[math.random(#keys)], ["Content-Type"] = "application/json"}, body) end')
PY
	KEY=$(firstkey "$N")
	gwconf "$DATA" "$GW_ADMIN" "$GW" >"$WORK/gw-$N.caddyfile"
	start "gw-$N" "$WORK/gw-$N.caddyfile"
	PID=$LAST_PID
	STARTUP=$(first200 "$KEY")
	CPU_START=$(cpu_s "$PID")
	RSS=$(rss_mb "$PID")
	read -r L10 LBIG < <("$WORK/scale" lists -url "http://127.0.0.1:$GW" -in "$WORK/sample-$N.json" |
		awk '/list_small_p50/ {a=$2} /list_big_p50/ {b=$2} END {print a, b}')
	wrk -t1 -c"$CONNECTIONS" -d3s -s "$WORK/post-$N.lua" "http://127.0.0.1:$GW/api/v1/chat/completions" >/dev/null
	g0=$(cpu_ticks "$PID")
	OUT=$(wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s "$WORK/post-$N.lua" "http://127.0.0.1:$GW/api/v1/chat/completions")
	g1=$(cpu_ticks "$PID")
	REQS=$(awk '/requests in/ {print $1}' <<<"$OUT")
	NON2XX=$(awk '/Non-2xx/ {print $NF}' <<<"$OUT")
	[[ -z $NON2XX ]] || die "$NON2XX non-2xx answers under load; log: $WORK/gw-$N.log"
	RPS=$(awk '/Requests\/sec/ {printf "%.0f", $2}' <<<"$OUT")
	US=$(awk -v t="$((g1 - g0))" -v r="$REQS" -v hz="$TCK" 'BEGIN {printf "%.0f", t / hz * 1e6 / r}')
	GC=$(gc_pct "$WORK/gw-$N.log")
	RSS2=$(rss_mb "$PID")
	kill -TERM "$PID"
	wait "$PID" 2>/dev/null || true
	start "gw-$N-restart" "$WORK/gw-$N.caddyfile"
	PID=$LAST_PID
	RESTART=$(first200 "$KEY")
	CPU_RESTART=$(cpu_s "$PID")
	kill -KILL "$PID"
	wait "$PID" 2>/dev/null || true
	start "gw-$N-crash" "$WORK/gw-$N.caddyfile"
	PID=$LAST_PID
	CRASH=$(first200 "$KEY")
	CPU_CRASH=$(cpu_s "$PID")
	kill -TERM "$PID"
	wait "$PID" 2>/dev/null || true
	printf '%-8s %9s %9s %9s %9s %10s %10s %9s %8s %10s %10s %10s\n' "$N" "$STARTUP" "$RSS" "$L10" "$LBIG" "$RPS" "$US" "${GC:-?}" "$RSS2" "$RESTART" "$CRASH" \
		"$CPU_START/$CPU_RESTART/$CPU_CRASH"
	((PAIRS > 0)) || rm -rf "$DATA"
done

# Pairs: the smallest and the largest size's gateways up at once, loaded
# in turn, so that both meet the same moments of a shared machine; the
# ratio of their CPU per request, pair by pair, and its median.
((PAIRS > 0)) || exit 0
SMALL=$(tr ' ' '\n' <<<"$SIZES" | sort -n | head -1)
LARGE=$(tr ' ' '\n' <<<"$SIZES" | sort -n | tail -1)
[[ $SMALL != "$LARGE" ]] || die "SCALE_PAIRS needs two sizes"
GW2=$(port) GW2_ADMIN=$(port)
gwconf "$WORK/data-$SMALL" "$GW_ADMIN" "$GW" >"$WORK/pair-small.caddyfile"
gwconf "$WORK/data-$LARGE" "$GW2_ADMIN" "$GW2" >"$WORK/pair-large.caddyfile"
start pair-small "$WORK/pair-small.caddyfile"
PSMALL=$LAST_PID
start pair-large "$WORK/pair-large.caddyfile"
PLARGE=$LAST_PID
first200 "$(firstkey "$SMALL")" >/dev/null
GW=$GW2 first200 "$(firstkey "$LARGE")" >/dev/null
load() { # pid port size seconds -> CPU µs per request
	local g0 g1 out
	g0=$(cpu_ticks "$1")
	out=$(wrk -t1 -c"$CONNECTIONS" -d"$4s" -s "$WORK/post-$3.lua" "http://127.0.0.1:$2/api/v1/chat/completions")
	g1=$(cpu_ticks "$1")
	awk -v t="$((g1 - g0))" -v r="$(awk '/requests in/ {print $1}' <<<"$out")" -v hz="$TCK" 'BEGIN {printf "%.1f", t / hz * 1e6 / r}'
}
load "$PSMALL" "$GW" "$SMALL" 3 >/dev/null
load "$PLARGE" "$GW2" "$LARGE" 3 >/dev/null
printf '\n%-6s %12s %12s %8s   (gw µs/req: %s and %s keys up at once, loaded in turn, %s s each)\n' pair "$SMALL" "$LARGE" ratio "$SMALL" "$LARGE" "$PAIR_DURATION"
RATIOS=()
for i in $(seq 1 "$PAIRS"); do
	a=$(load "$PSMALL" "$GW" "$SMALL" "$PAIR_DURATION")
	b=$(load "$PLARGE" "$GW2" "$LARGE" "$PAIR_DURATION")
	r=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", b / a}')
	RATIOS+=("$r")
	printf '%-6s %12s %12s %8s\n' "$i" "$a" "$b" "$r"
done
printf 'median ratio %s\n' "$(printf '%s\n' "${RATIOS[@]}" | sort -n | awk '{v[NR] = $1} END {printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')"

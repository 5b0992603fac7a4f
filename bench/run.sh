#!/usr/bin/env bash
# Tollgate end-to-end benchmark: bare Caddy reverse_proxy (A) against the
# full tollgate chain on Badger (B) and on a shared Redis (C, storage redis:
# the several-replicas configuration) in front of the same mock upstream,
# interleaved A B C A B C ... in turns of a few seconds, on loopback. See
# bench/README.md for how to read the output. C runs when redis-server is
# installed (BENCH_REDIS=0: never).
#
#   bench/run.sh                         # pinned mode: report only
#   BENCH_MODE=shared bench/run.sh       # shared-box mode: nothing pinned, 30 s runs, 16 and 64 connections
#   BENCH_MODE=memory bench/run.sh       # resident memory of A and B over 500,000 requests each
#   BENCH_KEYS=100 bench/run.sh          # 100 accounts with a key each, requests spread over them
#   BENCH_MIN_RATIO=0.85 bench/run.sh    # exit 1 if throughput(B)/throughput(A) < 0.85
set -euo pipefail

# ---- settings (environment) -------------------------------------------------
# BENCH_MODE picks the defaults below: pinned (each gateway alone on one
# core, the client on the other: the chain's CPU in isolation), shared
# (nothing pinned, GOMAXPROCS as Caddy sets it, the gateway sharing the
# cores with the client and the upstream, as on a small box) or memory
# (shared, load in turns until B served BENCH_REQUESTS requests; RSS).
MODE=${BENCH_MODE:-pinned}
case $MODE in
pinned) d_duration=10 d_slice=2 d_settle=1.5 d_conns=32 d_threads=1 ;;
shared) d_duration=30 d_slice=10 d_settle=3 d_conns="16 64" d_threads=1 ;;
memory) d_duration=10 d_slice=10 d_settle=1 d_conns=32 d_threads=1 ;;
*) printf 'bench: BENCH_MODE must be pinned, shared or memory\n' >&2; exit 2 ;;
esac
DURATION=${BENCH_DURATION:-$d_duration} # seconds per measured run (memory: per turn)
ROUNDS=${BENCH_ROUNDS:-3}               # A+B pairs
SLICE=${BENCH_SLICE:-$d_slice}          # seconds per slice: a round alternates the configs in slices
SETTLE=${BENCH_SETTLE:-$d_settle}       # seconds after a slice before its CPU is read (background work)
WARMUP=${BENCH_WARMUP:-3}               # seconds of unmeasured load per config first
CONNECTIONS=${BENCH_CONNECTIONS:-$d_conns}  # wrk connections; a list ("16 64") measures each in turn
THREADS=${BENCH_THREADS:-$d_threads}    # wrk threads
REQUESTS=${BENCH_REQUESTS:-500000}      # memory: requests B serves in all
RSS_FROM=${BENCH_RSS_FROM:-50000}       # memory: RSS growth is measured from this many requests
MAX_RSS_GROWTH=${BENCH_MAX_RSS_GROWTH_MB:-}  # memory: exit 1 if B's RSS grows more (MB); empty: report only
MIN_RATIO=${BENCH_MIN_RATIO:-}          # empty: report only
RATIO_METRIC=${BENCH_RATIO_METRIC:-throughput}  # what BENCH_MIN_RATIO checks: throughput or cpu
MAX_CPU_DELTA=${BENCH_MAX_CPU_DELTA_US:-}  # empty: report only
MAX_CPU_RATIO=${BENCH_MAX_CPU_RATIO:-}  # exit 1 if CPU per request B/A is above it; empty: report only
GATEWAY_CPUS=${BENCH_GATEWAY_CPUS:-0}   # pinned: taskset list for the gateway under test
CLIENT_CPUS=${BENCH_CLIENT_CPUS:-1}     # pinned: taskset list for wrk and the upstream
REDIS_CPUS=${BENCH_REDIS_CPUS:-}        # pinned: taskset list for C's redis-server; default the gateway's
CADDY=${BENCH_CADDY:-}                  # a prebuilt binary; empty: build ./cmd/caddy
UPSTREAM_BIN=${BENCH_UPSTREAM:-}        # a prebuilt ./bench/upstream; empty: build it
KEEP=${BENCH_KEEP:-}                    # non-empty: keep the work directory
DATA_DIR=${BENCH_DATA_DIR:-}            # Badger directory of B; empty: in the work dir
PROFILE=${BENCH_PROFILE:-}              # a directory: save CPU and allocation profiles of the last round there
REDIS=${BENCH_REDIS:-1}                 # 0: skip configuration C (storage redis)
REDIS_FSYNC=${BENCH_REDIS_FSYNC:-always}  # appendfsync of C's redis-server: always or everysec
[[ $MODE == memory ]] && REDIS=0
KEYS=${BENCH_KEYS:-1}                   # accounts, one API key each; wrk spreads its requests over them

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-bench.XXXXXX")
PIDS=()

log() { printf '%s\n' "$*" >&2; }
die() { log "bench: $*"; exit 2; }

cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	if [[ -n $KEEP ]]; then
		log "bench: work directory kept: $WORK"
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
[[ $RATIO_METRIC == throughput || $RATIO_METRIC == cpu ]] || die "BENCH_RATIO_METRIC must be throughput or cpu"
trap 'exit 130' INT TERM

# ---- tools ------------------------------------------------------------------
if ! command -v wrk >/dev/null; then
	log "bench: installing wrk"
	SUDO=; [[ $(id -u) -ne 0 ]] && SUDO=sudo
	$SUDO apt-get install -y wrk >/dev/null 2>&1 ||
		{ $SUDO apt-get update >/dev/null && $SUDO apt-get install -y wrk >/dev/null; } ||
		die "could not install wrk (apt-get install -y wrk)"
fi
command -v curl >/dev/null || die "curl is required"
if command -v jq >/dev/null; then
	json() { jq -r "$1"; }
elif command -v python3 >/dev/null; then
	json() { python3 -c 'import json,sys
v=json.load(sys.stdin)
for k in sys.argv[1].lstrip(".").split("."): v=v[k]
print(v)' "$1"; }
else
	die "jq or python3 is required"
fi

PIN_GW=() PIN_CLIENT=() PIN_REDIS=()
NCPU=$(nproc)
if [[ $MODE != pinned ]]; then
	PINNING="nothing pinned ($MODE mode): gateways, wrk and upstream share $NCPU CPU(s), GOMAXPROCS as Caddy sets it"
elif command -v taskset >/dev/null && ((NCPU >= 2)); then
	PIN_GW=(taskset -c "$GATEWAY_CPUS")
	PIN_CLIENT=(taskset -c "$CLIENT_CPUS")
	PIN_REDIS=(taskset -c "${REDIS_CPUS:-$GATEWAY_CPUS}")
	PINNING="gateway on CPU $GATEWAY_CPUS; wrk and upstream on CPU $CLIENT_CPUS"
else
	PINNING="none (taskset missing or a single CPU): expect noisier numbers"
fi

if [[ -z $CADDY ]]; then
	log "bench: building cmd/caddy"
	CADDY=$WORK/caddy
	(cd "$ROOT" && go build -o "$CADDY" ./cmd/caddy) || die "build failed"
fi
if [[ -z $UPSTREAM_BIN ]]; then
	log "bench: building bench/upstream"
	UPSTREAM_BIN=$WORK/upstream
	(cd "$ROOT" && go build -o "$UPSTREAM_BIN" ./bench/upstream) || die "build failed"
fi

# ---- ports and configs ------------------------------------------------------
# Ports below the kernel's ephemeral range (32768 up), which outgoing
# connections never take, and none twice.
used_ports=" "
free_port() { # name: sets the variable name to a free port
	local p
	while :; do
		p=$((20000 + RANDOM % 12000))
		[[ $used_ports == *" $p "* ]] && continue
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			used_ports+="$p "
			printf -v "$1" %s "$p"
			return
		fi
	done
}
for v in UP UP_ADMIN A A_ADMIN B B_ADMIN C C_ADMIN REDIS_PORT; do free_port $v; done
if [[ $REDIS != 0 ]] && ! command -v redis-server >/dev/null; then
	log "bench: redis-server is not installed (apt-get install redis-server): configuration C skipped"
	REDIS=0
fi
CONFIGS=(A B)
[[ $REDIS != 0 ]] && CONFIGS+=(C)
[[ -z $DATA_DIR ]] && DATA_DIR=$WORK/data

globals() { # admin port
	printf '\tadmin 127.0.0.1:%s\n\tpersist_config off\n\tskip_install_trust\n\tauto_https off\n' "$1"
}

# The upstream: the mock provider, no artificial latency, so that the run is
# CPU-bound. Same process for A and B. It is bench/upstream, the gateway's
# binary with a listener wrapper that counts the connections it accepts
# (read at its admin API's /bench/conns): the connections each gateway
# opened to its upstream during its turns.
cat >"$WORK/upstream.caddyfile" <<EOF
{
$(globals "$UP_ADMIN")
	servers {
		listener_wrappers {
			bench_conns
		}
	}
}
http://:$UP {
	bind 127.0.0.1
	tollgate_mock_provider {
		latency 0ms
	}
}
EOF

# A: bare reverse_proxy under /api/v1 (all B's handler serves), with
# Caddy's defaults, as an operator runs it for JSON traffic (Caddy flushes
# event streams by itself); B's provider proxies keep the same defaults.
cat >"$WORK/bare.caddyfile" <<EOF
{
$(globals "$A_ADMIN")
}
http://:$A {
	bind 127.0.0.1
	reverse_proxy /api/v1/* 127.0.0.1:$UP
}
EOF

# B: the full chain of Caddyfile.example, durable metering on disk.
cat >"$WORK/chain.caddyfile" <<EOF
{
$(globals "$B_ADMIN")
	tollgate {
		data_dir $DATA_DIR
		brand service
		model tollgate-mock {
			context_length 8192
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
http://:$B {
	bind 127.0.0.1
	tollgate
}
EOF

# C: the same chain with storage redis (one replica of several), on a
# redis-server pinned with the gateway: its CPU counts as the gateway's.
sed -e "s|^\t\tdata_dir .*|\t\tstorage redis {\n\t\t\taddress 127.0.0.1:$REDIS_PORT\n\t\t\tkey_prefix bench:\n\t\t}|" \
	-e "s|admin 127.0.0.1:$B_ADMIN|admin 127.0.0.1:$C_ADMIN|" -e "s|http://:$B {|http://:$C {|" \
	"$WORK/chain.caddyfile" >"$WORK/redis.caddyfile"

# Caddy sets GOMAXPROCS itself (the CPUs it may run on, its cgroup's quota).
unset GOMAXPROCS
start_caddy() { # name config pin... (the binary: $BIN, else $CADDY)
	local name=$1 config=$2
	shift 2
	mkdir -p "$WORK/home-$name"
	HOME=$WORK/home-$name XDG_DATA_HOME=$WORK/home-$name XDG_CONFIG_HOME=$WORK/home-$name \
		"$@" "${BIN:-$CADDY}" run --config "$config" --adapter caddyfile >"$WORK/$name.log" 2>&1 &
	LAST_PID=$!
	PIDS+=("$LAST_PID")
}

wait_http() { # url name
	local i
	for i in $(seq 1 200); do
		if curl -s -o /dev/null --max-time 1 "$1"; then return 0; fi
		sleep 0.05
	done
	die "$2 did not start; log: $(tail -20 "$WORK/$2.log")"
}

BIN=$UPSTREAM_BIN start_caddy upstream "$WORK/upstream.caddyfile" "${PIN_CLIENT[@]}"
UP_PID=$LAST_PID
start_caddy bare "$WORK/bare.caddyfile" "${PIN_GW[@]}"
A_PID=$LAST_PID
start_caddy chain "$WORK/chain.caddyfile" "${PIN_GW[@]}"
B_PID=$LAST_PID
wait_http "http://127.0.0.1:$UP/" upstream
wait_http "http://127.0.0.1:$A/" bare
wait_http "http://127.0.0.1:$B/" chain
C_PID= REDIS_PID=
if [[ $REDIS != 0 ]]; then
	mkdir -p "$WORK/redis"
	"${PIN_REDIS[@]}" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$WORK/redis" --save '' \
		--appendonly yes --appendfsync "$REDIS_FSYNC" --protected-mode no --loglevel warning >"$WORK/redis-server.log" 2>&1 &
	REDIS_PID=$!
	PIDS+=("$REDIS_PID")
	for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$REDIS_PORT") 2>/dev/null && break; sleep 0.05; done
	start_caddy redis "$WORK/redis.caddyfile" "${PIN_GW[@]}"
	C_PID=$LAST_PID
	wait_http "http://127.0.0.1:$C/" redis
fi

# ---- tenant: account, credits, management key, API key ----------------------
# tenant admin_port gateway_port -> an API key of a fresh account with credits
tenant() {
	local admin=$1 gw=$2 account mgmt
	op() { # method path body
		curl -sS -f -X "$1" "http://127.0.0.1:$admin/tollgate$2" -H 'Content-Type: application/json' -d "$3"
	}
	account=$(op POST /accounts '{"name":"bench","type":"organization"}' | json .data.id)
	op POST "/accounts/$account/credits" '{"amount":"1000000"}' >/dev/null
	mgmt=$(op POST "/accounts/$account/management-keys" '{"name":"bench"}' | json .key)
	curl -sS -f "http://127.0.0.1:$gw/api/v1/keys" -H "Authorization: Bearer $mgmt" \
		-H 'Content-Type: application/json' -d '{"name":"bench"}' | json .key
}
# The operator API answers 503 until the tollgate app runs (Caddy serves
# the site a moment before, on a loaded machine).
wait_operator() { # admin_port name
	local i
	for i in $(seq 1 200); do
		[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://127.0.0.1:$1/tollgate/accounts") == 200 ]] && return 0
		sleep 0.05
	done
	die "$2: the operator API did not come up; log: $(tail -20 "$WORK/$2.log")"
}
wait_operator "$B_ADMIN" chain
[[ $REDIS != 0 ]] && wait_operator "$C_ADMIN" redis
# tenants admin_port gateway_port -> KEYS API keys of as many accounts, one a line
tenants() {
	local i key
	for i in $(seq 1 "$KEYS"); do
		key=$(tenant "$1" "$2")
		[[ $key == sk-* ]] || die "could not create an API key on port $2"
		echo "$key"
	done
}
((KEYS >= 1)) || die "BENCH_KEYS must be at least 1"
KEYS_B=$(tenants "$B_ADMIN" "$B")
KEY=${KEYS_B%%$'\n'*}
KEY_C= KEYS_C=
if [[ $REDIS != 0 ]]; then
	KEYS_C=$(tenants "$C_ADMIN" "$C")
	KEY_C=${KEYS_C%%$'\n'*}
fi

BODY='{"model":"tollgate-mock","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write one sentence about the sea, please."}],"max_tokens":256}'
post_lua() { # keys (one a line) file: each request takes the next key in turn
	{
		printf 'wrk.method = "POST"\nwrk.body = [[%s]]\nwrk.headers["Content-Type"] = "application/json"\n' "$BODY"
		printf 'wrk.headers["Authorization"] = "Bearer %s"\n' "${1%%$'\n'*}"
		if ((KEYS > 1)); then
			printf 'local keys = {'
			printf '"%s",' $1
			printf '}\nlocal n = 0\nrequest = function()\n\tn = n %% #keys + 1\n\twrk.headers["Authorization"] = "Bearer " .. keys[n]\n\treturn wrk.format()\nend\n'
		fi
	} >"$2"
}
post_lua "$KEYS_B" "$WORK/post.lua"
[[ -n $KEYS_C ]] && post_lua "$KEYS_C" "$WORK/post-c.lua"

check() { # port name [key]
	local out
	out=$(curl -sS -w '\n%{http_code}' "http://127.0.0.1:$1/api/v1/chat/completions" \
		-H "Authorization: Bearer ${3:-$KEY}" -H 'Content-Type: application/json' -d "$BODY")
	[[ ${out##*$'\n'} == 200 ]] || die "$2: a chat completion failed: $out"
	echo "${out%$'\n'*}"
}
check "$A" bare >/dev/null || exit 2
ANSWER=$(check "$B" chain) || exit 2
[[ $ANSWER == *'"cost":'* ]] || die "chain: the answer carries no usage.cost: $ANSWER"
if [[ $REDIS != 0 ]]; then
	ANSWER=$(check "$C" redis "$KEY_C") || exit 2
	[[ $ANSWER == *'"cost":'* ]] || die "redis: the answer carries no usage.cost: $ANSWER"
fi

# ---- measurement --------------------------------------------------------------
TCK=$(getconf CLK_TCK)
cpu_ticks() { # pid -> utime+stime of the whole process, in clock ticks
	local s
	s=$(<"/proc/$1/stat")
	s=${s##*) }
	awk '{print $12 + $13}' <<<"$s"
}
# up_conns -> the connections the upstream accepted so far.
up_conns() { curl -sS -f --max-time 5 "http://127.0.0.1:$UP_ADMIN/bench/conns" || die "reading the upstream's connection count failed"; }
# rss pid -> "resident anon" in kB: all resident memory (VmRSS) and its
# anonymous part (the heap and stacks, without mapped files).
rss() { awk '/^VmRSS:/ {r = $2} /^RssAnon:/ {a = $2} END {print r + 0, a + 0}' "/proc/$1/status"; }

# to_ms turns a wrk latency ("512.00us", "1.20ms", "2.01s") into ms.
to_ms() { awk '{v = $1 + 0; if ($1 ~ /us$/) v /= 1000; else if ($1 ~ /[0-9]s$/) v *= 1000; printf "%.3f", v}' <<<"$1"; }

# run_wrk port seconds connections [lua] -> "requests seconds non2xx socket_errors p50_ms p99_ms"
run_wrk() {
	local out reqs secs non2xx errs p50 p99
	out=$(timeout $(($2 + 30)) "${PIN_CLIENT[@]}" wrk -t"$THREADS" -c"$3" -d"${2}s" --latency \
		-s "${4:-$WORK/post.lua}" "http://127.0.0.1:$1/api/v1/chat/completions") || die "wrk failed: $out"
	reqs=$(awk '/requests in/ {print $1}' <<<"$out")
	secs=$(awk '/requests in/ {sub(/s,$/, "", $4); print $4}' <<<"$out")
	non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
	errs=$(awk '/Socket errors/ {gsub(/,/, ""); print $4 + $6 + $8 + $10}' <<<"$out")
	p50=$(to_ms "$(awk '$1 == "50%" {print $2}' <<<"$out")")
	p99=$(to_ms "$(awk '$1 == "99%" {print $2}' <<<"$out")")
	echo "$reqs $secs ${non2xx:-0} ${errs:-0} $p50 $p99"
}

# config_of cfg: sets port, pid, admin, name and lua of a configuration.
config_of() {
	lua=$WORK/post.lua
	case $1 in
	A) port=$A pid=$A_PID admin=$A_ADMIN name=bare ;;
	B) port=$B pid=$B_PID admin=$B_ADMIN name=chain ;;
	C) port=$C pid=$C_PID admin=$C_ADMIN name=redis lua=$WORK/post-c.lua ;;
	esac
}

FIRST_CONNS=${CONNECTIONS%% *}
((SLICE > 0 && SLICE <= DURATION)) || SLICE=$DURATION
SLICES=$(((DURATION + SLICE - 1) / SLICE))
declare -A served=() # requests each config served so far, warm-up included
if [[ $MODE == memory ]]; then
	log "bench: $PINNING; $FIRST_CONNS connections; A and B in turns of ${DURATION}s until B served $REQUESTS requests"
else
	log "bench: $PINNING; $CONNECTIONS connections, $THREADS wrk thread(s), $KEYS key(s) of as many accounts; ${ROUNDS}x(${DURATION}s each of ${CONFIGS[*]}, in turns of ${SLICE}s) after ${WARMUP}s warm-up each"
fi
[[ $REDIS != 0 ]] && log "bench: C is storage redis (appendfsync $REDIS_FSYNC); its CPU per request includes redis-server's"
for cfg in "${CONFIGS[@]}"; do
	config_of "$cfg"
	read -r rss_start_kb _ <<<"$(rss "$pid")"
	log "bench: $cfg ($name) resident at start: $((rss_start_kb / 1024)) MB"
	res=$(run_wrk "$port" "$WARMUP" "$FIRST_CONNS" "$lua") || exit 2
	served[$cfg]=${res%% *}
done

# ---- memory mode --------------------------------------------------------------
# Load A and B in turns (same connections, same time) until B served
# REQUESTS requests, reading each one's resident memory after every turn;
# B's growth from RSS_FROM requests to the end is the figure.
if [[ $MODE == memory ]]; then
	MEM=$WORK/memory
	: >"$MEM"
	printf '%-6s %11s %10s %10s %10s\n' config requests "req/s" "RSS MB" "anon MB"
	while ((served[B] < REQUESTS)); do
		for cfg in A B; do
			config_of "$cfg"
			res=$(run_wrk "$port" "$DURATION" "$FIRST_CONNS" "$lua") || exit 2
			read -r reqs secs non2xx _ <<<"$res"
			((non2xx == 0)) || die "config $cfg: $non2xx answers were not 2xx (see $WORK/*.log with BENCH_KEEP=1)"
			sleep "$SETTLE"
			served[$cfg]=$((served[$cfg] + reqs))
			read -r r a <<<"$(rss "$pid")"
			printf '%-6s %11d %10.0f %10.1f %10.1f\n' "$cfg" "${served[$cfg]}" "$(awk -v n="$reqs" -v s="$secs" 'BEGIN {print n / s}')" \
				"$(awk -v k="$r" 'BEGIN {print k / 1024}')" "$(awk -v k="$a" 'BEGIN {print k / 1024}')"
			echo "$cfg ${served[$cfg]} $r $a" >>"$MEM"
		done
	done
	if [[ -n $PROFILE ]]; then
		mkdir -p "$PROFILE"
		curl -sS -o "$PROFILE/chain-heap.pprof" "http://127.0.0.1:$B_ADMIN/debug/pprof/heap" || log "bench: heap profile failed"
	fi
	awk -v from="$RSS_FROM" -v maxg="$MAX_RSS_GROWTH" '
	{ if (!($1 in at) && $2 >= from) { at[$1] = $2; r0[$1] = $3; a0[$1] = $4 }; n[$1] = $2; r1[$1] = $3; a1[$1] = $4 }
	END {
		fail = 0
		for (c in n) {
			if (!(c in at)) { printf "%s: fewer than %d requests\n", c, from; continue }
			printf "%s: RSS %.1f MB after %d requests, %.1f MB after %d: %+.1f MB (anon %.1f -> %.1f MB)\n", c, r0[c] / 1024, at[c], r1[c] / 1024, n[c], (r1[c] - r0[c]) / 1024, a0[c] / 1024, a1[c] / 1024
		}
		if (maxg != "" && ("B" in at) && (r1["B"] - r0["B"]) / 1024 > maxg + 0) { printf "FAIL: B grew more than BENCH_MAX_RSS_GROWTH_MB=%s\n", maxg; fail = 1 }
		exit fail
	}' "$MEM"
	exit
fi

# ---- CPU per request ----------------------------------------------------------
printf '%-6s %5s %5s %10s %9s %11s %8s %13s %8s %8s %13s %8s %8s\n' config conns round req/s requests "gw µs/req" "gw util" "upstream µs/req" "p50 ms" "p99 ms" "RSS MB" "anon MB" "up conns"
# A round gives each config DURATION seconds of load, in slices of SLICE
# seconds taken in turn (A B C A B C ...): the host's speed drifts over tens
# of seconds (other tenants, frequency), and configs measured in one long
# run each were exposed to different drift; slices spread it over all of
# them alike. Requests, CPU ticks and time add up over a round's slices.
measure() { # connections
	local conns=$1 RESULTS=$WORK/results-$1 round slice len cfg prof aprof res reqs secs non2xx errs p50 p99 t0 t1 g0 g1 u0 u1 c0 c1 r a c_reqs=0 r0 r_ticks=0
	: >"$RESULTS"
	redis_cmd config resetstat >/dev/null
	for round in $(seq 1 "$ROUNDS"); do
		declare -A n_req=() n_secs=() n_g=() n_u=() n_t=() n_c=() s50=() s99=() rss0=() rss1=() anon1=()
		for slice in $(seq 1 "$SLICES"); do
			len=$SLICE
			((slice == SLICES)) && len=$((DURATION - SLICE * (SLICES - 1)))
			for cfg in "${CONFIGS[@]}"; do
				config_of "$cfg"
				[[ $slice == 1 ]] && read -r r _ <<<"$(rss "$pid")" && rss0[$cfg]=$r
				prof= aprof=
				if [[ -n $PROFILE && $round == "$ROUNDS" && $slice == 1 ]]; then
					mkdir -p "$PROFILE"
					curl -sS -o "$PROFILE/$name-c$conns.pprof" \
						"http://127.0.0.1:$admin/debug/pprof/profile?seconds=$((len > 2 ? len - 1 : 1))" &
					prof=$!
					curl -sS -o "$PROFILE/$name-c$conns-allocs.pprof" \
						"http://127.0.0.1:$admin/debug/pprof/allocs?seconds=$((len > 2 ? len - 1 : 1))" &
					aprof=$!
				fi
				c0=$(up_conns)
				g0=$(cpu_ticks "$pid") u0=$(cpu_ticks "$UP_PID") t0=$(date +%s.%N)
				[[ $cfg == C ]] && r0=$(cpu_ticks "$REDIS_PID") && g0=$((g0 + r0))
				res=$(run_wrk "$port" "$len" "$conns" "$lua") || exit 2
				[[ -n $prof ]] && { wait "$prof" || log "bench: profiling $name failed"; }
				[[ -n $aprof ]] && { wait "$aprof" || log "bench: allocation profile of $name failed"; }
				read -r reqs secs non2xx errs p50 p99 <<<"$res"
				t1=$(date +%s.%N)
				c1=$(up_conns)
				# The work the turn left to the gateway's background (the
				# journal's checkpoint, Badger's flushes) is counted in its turn.
				sleep "$SETTLE"
				g1=$(cpu_ticks "$pid") u1=$(cpu_ticks "$UP_PID")
				[[ $cfg == C ]] && r=$(cpu_ticks "$REDIS_PID") && g1=$((g1 + r)) && r_ticks=$((r_ticks + r - r0))
				((non2xx == 0)) || die "config $cfg: $non2xx answers were not 2xx (see $WORK/*.log with BENCH_KEEP=1)"
				((errs == 0)) || log "bench: config $cfg round $round: $errs socket errors"
				served[$cfg]=$((served[$cfg] + reqs))
				[[ $cfg == C ]] && c_reqs=$((c_reqs + reqs))
				read -r r a <<<"$(rss "$pid")"
				rss1[$cfg]=$r anon1[$cfg]=$a
				n_req[$cfg]=$((${n_req[$cfg]:-0} + reqs))
				n_secs[$cfg]=$(awk -v a="${n_secs[$cfg]:-0}" -v b="$secs" 'BEGIN {print a + b}')
				n_g[$cfg]=$((${n_g[$cfg]:-0} + g1 - g0))
				n_u[$cfg]=$((${n_u[$cfg]:-0} + u1 - u0))
				n_c[$cfg]=$((${n_c[$cfg]:-0} + c1 - c0))
				n_t[$cfg]=$(awk -v a="${n_t[$cfg]:-0}" -v t0="$t0" -v t1="$t1" 'BEGIN {print a + t1 - t0}')
				# Latency: the slices' percentiles weighted by their requests.
				s50[$cfg]="${s50[$cfg]:-} $reqs:$p50" s99[$cfg]="${s99[$cfg]:-} $reqs:$p99"
			done
		done
		for cfg in "${CONFIGS[@]}"; do
			awk -v c="$cfg" -v k="$conns" -v r="$round" -v n="${n_req[$cfg]}" -v s="${n_secs[$cfg]}" -v g="${n_g[$cfg]}" -v u="${n_u[$cfg]}" \
				-v tck="$TCK" -v t="${n_t[$cfg]}" -v out="$RESULTS" -v l50="${s50[$cfg]}" -v l99="${s99[$cfg]}" \
				-v m0="${rss0[$cfg]}" -v m1="${rss1[$cfg]}" -v a1="${anon1[$cfg]}" -v uc="${n_c[$cfg]}" '
			function weighted(list,   k, i, parts, x, w, sum) {
				k = split(list, parts, " "); w = 0; sum = 0
				for (i = 1; i <= k; i++) { split(parts[i], x, ":"); w += x[1]; sum += x[1] * x[2] }
				return w ? sum / w : 0
			}
			BEGIN {
				rps = n / s; gus = g / tck / n * 1e6; uus = u / tck / n * 1e6; util = g / tck / t * 100
				p50 = weighted(l50); p99 = weighted(l99)
				printf "%-6s %5d %5d %10.0f %9d %11.1f %7.0f%% %13.1f %8.2f %8.2f %6.0f->%-6.0f %8.0f %8d\n", c, k, r, rps, n, gus, util, uus, p50, p99, m0 / 1024, m1 / 1024, a1 / 1024, uc
				printf "%s %d %f %f %f %f %f %f %f %f %d\n", c, r, rps, gus, uus, util, p50, p99, m0, m1, uc >> out
			}'
		done
	done
	summary "$conns" "$RESULTS"
	redis_commands "$c_reqs" "$r_ticks"
}

# redis_cmd args...: a command to C's redis-server (nothing without C or
# redis-cli).
redis_cmd() {
	[[ -n $REDIS_PID ]] && command -v redis-cli >/dev/null || return 0
	redis-cli -p "$REDIS_PORT" "$@"
}

# redis_commands requests ticks: redis-server's CPU per C request (its
# ticks in C's turns), then its calls and CPU by command (INFO
# commandstats since measure's reset; the scripts' time includes the
# commands they call, which are also listed on their own).
redis_commands() {
	(($1 > 0)) || return 0
	awk -v n="$1" -v t="$2" -v tck="$TCK" 'BEGIN { printf "redis-server CPU per C request: %.1f µs (the rest of C'"'"'s is the gateway'"'"'s)\n", t / tck / n * 1e6 }'
	redis_cmd info commandstats | tr -d '\r' | awk -F'[:,=]' -v n="$1" '
		/^cmdstat_/ { sub(/^cmdstat_/, "", $1); if ($3 / n >= 0.01) line[$1] = sprintf("%s %.2f calls %.1f µs", $1, $3 / n, $5 / n); us[$1] = $5 / n }
		END {
			k = 0; for (c in line) order[++k] = c
			for (i = 2; i <= k; i++) for (j = i; j > 1 && us[order[j-1]] < us[order[j]]; j--) { t = order[j]; order[j] = order[j-1]; order[j-1] = t }
			if (k == 0) exit
			printf "redis-server per C request:    "
			for (i = 1; i <= k; i++) printf "%s%s", (i > 1 ? "; " : ""), line[order[i]]
			printf "\n"
		}'
}

# Pairwise (B_i vs A_i, measured back to back) then the median over rounds,
# which is robust to a noisy neighbour hitting one round.
summary() { # connections results
	awk -v conns="$1" -v dur="$DURATION" -v min="$MIN_RATIO" -v metric="$RATIO_METRIC" -v maxd="$MAX_CPU_DELTA" -v maxr="$MAX_CPU_RATIO" '
	function median(a, n,   i, j, t) {
		for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
		return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
	}
	$1 == "A" { ra[$2] = $3; ca[$2] = $4; ua[$2] = $6; pa50[$2] = $7; pa99[$2] = $8; oa[$2] = $11 }
	$1 == "B" { rb[$2] = $3; cb[$2] = $4; ub[$2] = $6; pb50[$2] = $7; pb99[$2] = $8; ob[$2] = $11 }
	$1 == "C" { rc[$2] = $3; cc[$2] = $4; pc50[$2] = $7; pc99[$2] = $8; oc[$2] = $11 }
	{ if (!($1 in m0) || $2 < first[$1]) { first[$1] = $2; m0[$1] = $9 }; if ($2 >= last[$1]) { last[$1] = $2; m1[$1] = $10 } }
	END {
		n = 0
		for (r in ra) if (r in rb) {
			n++; ratio[n] = rb[r] / ra[r]; eff[n] = ca[r] / cb[r]; cpur[n] = cb[r] / ca[r]; delta[n] = cb[r] - ca[r]; a[n] = ca[r]; b[n] = cb[r]
			util[2*n-1] = ua[r]; util[2*n] = ub[r]
			lo = (n == 1 || ratio[n] < lo) ? ratio[n] : lo; hi = (n == 1 || ratio[n] > hi) ? ratio[n] : hi
			dlo = (n == 1 || delta[n] < dlo) ? delta[n] : dlo; dhi = (n == 1 || delta[n] > dhi) ? delta[n] : dhi
		}
		if (n == 0) { print "no complete rounds"; exit 2 }
		mr = median(ratio, n); me = median(eff, n); md = median(delta, n); ma = median(a, n); mb = median(b, n); mc = median(cpur, n)
		mu = median(util, 2*n)
		printf "\n%d connections:\n", conns
		printf "throughput(B)/throughput(A):   %.3f  (median of %d rounds; range %.3f-%.3f)\n", mr, n, lo, hi
		printf "CPU-bound ratio A µs / B µs:   %.3f  (the throughput ratio on a saturated gateway core)\n", me
		printf "gateway CPU per request:       A %.1f µs, B %.1f µs, B-A %+.1f µs (rounds %+.1f to %+.1f), B/A %.3fx (medians)\n", ma, mb, md, dlo, dhi, mc
		k = 0
		for (r in ra) if (r in rb) { k++; x50[k] = pa50[r]; x99[k] = pa99[r]; y50[k] = pb50[r]; y99[k] = pb99[r] }
		printf "latency p50/p99:               A %.2f/%.2f ms, B %.2f/%.2f ms (medians)\n", median(x50, k), median(x99, k), median(y50, k), median(y99, k)
		printf "resident memory:               A %.0f -> %.0f MB, B %.0f -> %.0f MB", m0["A"] / 1024, m1["A"] / 1024, m0["B"] / 1024, m1["B"] / 1024
		if ("C" in m0) printf ", C %.0f -> %.0f MB", m0["C"] / 1024, m1["C"] / 1024
		printf " (start of the first round, end of the last); at the end B/A %.2fx\n", m1["B"] / m1["A"]
		k = 0
		for (r in ra) if (r in rb) { k++; xo[k] = oa[r]; yo[k] = ob[r] }
		printf "upstream connections opened:   A %d, B %d per round of %d s (medians; %d connections to the gateway)", median(xo, k), median(yo, k), dur, conns
		k = 0
		for (r in rc) { k++; zo[k] = oc[r] }
		if (k > 0) printf ", C %d", median(zo, k)
		printf "\n"
		m = 0
		for (r in rc) if (r in ra && r in rb) { m++; cr[m] = rc[r] / ra[r]; cbr[m] = rc[r] / rb[r]; cu[m] = cc[r]; cd[m] = cc[r] - ca[r]; ccb[m] = cc[r] / cb[r]; z50[m] = pc50[r]; z99[m] = pc99[r] }
		if (m > 0) {
			printf "C (storage redis):             throughput(C)/throughput(A) %.3f; CPU %.1f µs/req, C-A %+.1f µs (gateway + redis-server); p50/p99 %.2f/%.2f ms (medians)\n", median(cr, m), median(cu, m), median(cd, m), median(z50, m), median(z99, m)
			printf "C against B (Badger):          throughput(C)/throughput(B) %.3f; CPU per request C/B %.2f (medians)\n", median(cbr, m), median(ccb, m)
		}
		if (mu < 90) printf "note: the gateway was only %.0f%% of a core busy (median): the client or other load limited throughput, so trust the CPU numbers over req/s\n", mu
		fail = 0
		gate = metric == "cpu" ? me : mr
		if (min != "" && gate < min + 0) { printf "FAIL: %s ratio %.3f below BENCH_MIN_RATIO=%s\n", metric, gate, min; fail = 1 }
		if (maxd != "" && md > maxd + 0) { printf "FAIL: B-A %.1f µs above BENCH_MAX_CPU_DELTA_US=%s\n", md, maxd; fail = 1 }
		if (maxr != "" && mc > maxr + 0) { printf "FAIL: CPU per request B/A %.3f above BENCH_MAX_CPU_RATIO=%s\n", mc, maxr; fail = 1 }
		exit fail
	}' "$2"
}

status=0
for conns in $CONNECTIONS; do
	measure "$conns" || { rc=$?; ((rc > status)) && status=$rc; }
done
exit "$status"

#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/bench/run.sh BUILD_DIR - every benchmark, each next to its baseline in
# the same run. Times drift on a shared machine; the ratios and the
# instruction counts (callgrind, exact from run to run) are what to compare.
set -eu
B=${1:-build}

echo "## core: decisions per second (tools/bench/bench_core.c)"
echo
"$B/bench/bench_core" -n 5000000
echo

if command -v valgrind >/dev/null 2>&1; then
	echo "## core: user-space instructions per decision (callgrind, 1 process)"
	echo
	# As built (librlcore.a linked as an embedder links it), and linked
	# as the shim is, with LTO: rl_table_take inlined into its caller
	# (the archive's objects are fat, so the same flags link either way).
	lto="$B/bench/bench_core-lto"
	# shellcheck disable=SC2046 # .cflags is a list of flags
	${CC:-cc} $(cat "$B/.cflags") -MF /dev/null -o "$lto" \
		"$(dirname "$0")/bench_core.c" "$B/librlcore.a" -lpthread \
		-flto=auto || lto=
	tot() {
		valgrind --tool=callgrind --callgrind-out-file=/dev/null \
			"$1" -n "$2" -w 1proc -d "$3" 2>&1 >/dev/null |
			sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
	}
	for bin in "$B/bench/bench_core" $lto; do
		[ "$bin" = "$lto" ] &&
			echo "Linked with LTO, as the shim is (\`$lto\`):" && echo
		echo "| design | instructions per decision |"
		echo "|---|---:|"
		for d in rlshim mutex; do
			a=$(tot "$bin" 100000 "$d")
			b=$(tot "$bin" 200000 "$d")
			echo "| $d | $(( (b - a) / 100000 )) |"
		done
		echo
	done
fi

# RL_BENCH_SHIM_B=path/to/another/librlshim.so runs it as (B) beside (b) in
# bench_http.py and as (o) in bench_answers.py (RL_BENCH_OLD_SHIM, the older
# name, still works); RL_BENCH_REPS and RL_BENCH_DURATION set bench_http's
# wrk runs (default 3 x 10 s).
SHIM_B=${RL_BENCH_SHIM_B:-${RL_BENCH_OLD_SHIM:-}}
# The HTTP instruction counts are read by cgout.py: first its own check.
if command -v valgrind >/dev/null 2>&1 && command -v gcc >/dev/null 2>&1; then
	python3 "$(dirname "$0")/test_cgout.py" >&2
fi
python3 "$(dirname "$0")/test_bench_http.py" >&2
if command -v wrk >/dev/null 2>&1 && command -v strace >/dev/null 2>&1 &&
	PATH="$PATH:/usr/sbin:/sbin" command -v nginx >/dev/null 2>&1; then
	echo "## HTTP: the shim in front of nginx (tools/bench/bench_http.py)"
	echo
	python3 "$(dirname "$0")/bench_http.py" --shim "$B/librlshim.so" \
		${SHIM_B:+--shim-b "$SHIM_B"} \
		${RL_BENCH_REPS:+--reps "$RL_BENCH_REPS"} \
		${RL_BENCH_DURATION:+--duration "$RL_BENCH_DURATION"}
	echo
else
	echo "## HTTP: the shim in front of nginx: skipped (needs nginx, wrk and strace)"
	echo
fi

# HTTPS (issue 27): nginx with `listen ... ssl`, alone and under the shim,
# beside the same in plaintext; about 5 minutes.
if command -v valgrind >/dev/null 2>&1 && command -v strace >/dev/null 2>&1 &&
	command -v openssl >/dev/null 2>&1 &&
	PATH="$PATH:/usr/sbin:/sbin" command -v nginx >/dev/null 2>&1; then
	echo "## HTTPS: the shim over libssl (tools/bench/bench_tls.py)"
	echo
	python3 "$(dirname "$0")/bench_tls.py" --shim "$B/librlshim.so"
	echo
else
	echo "## HTTPS: the shim over libssl: skipped (needs nginx, openssl, strace and valgrind)"
	echo
fi

if command -v strace >/dev/null 2>&1 &&
	PATH="$PATH:/usr/sbin:/sbin" command -v nginx >/dev/null 2>&1; then
	python3 "$(dirname "$0")/bench_answers.py" --shim "$B/librlshim.so" \
		${SHIM_B:+--old-shim "$SHIM_B"}
	echo
else
	echo "## The answer side: skipped (needs nginx and strace)"
	echo
fi

echo "## Redis: commands per request and added latency (tools/bench/bench_redis.c)"
echo
"$B/bench/bench_redis"
echo

if command -v wrk >/dev/null 2>&1; then
	python3 "$(dirname "$0")/bench_global.py"
	echo
else
	echo "## One limit across four hosts: skipped (needs wrk)"
	echo
fi

# 1 to 32 hosts x 1,000 to 100,000 keys, async and strict: about 4 minutes.
if command -v redis-benchmark >/dev/null 2>&1; then
	python3 "$(dirname "$0")/test_bench_fleet.py" --build "$B" >&2
	python3 "$(dirname "$0")/bench_fleet.py" --build "$B"
	echo
else
	echo "## A large fleet: skipped (needs redis-benchmark)"
	echo
fi

if command -v wrk >/dev/null 2>&1 &&
	PATH="$PATH:/usr/sbin:/sbin" command -v nginx >/dev/null 2>&1; then
	python3 "$(dirname "$0")/bench_strict_http.py"
else
	echo "## What strict costs an event-loop server: skipped (needs nginx and wrk)"
	echo
fi

if [ "$(id -u)" = 0 ]; then
	echo "## XDP: ns per packet (tools/bench/bench_xdp.c)"
	echo
	"$B/bench/bench_xdp"
	echo
else
	echo "## XDP: ns per packet: skipped (needs root to load XDP programs)"
	echo
fi

if [ "$(id -u)" = 0 ] && command -v hping3 >/dev/null 2>&1; then
	python3 "$(dirname "$0")/bench_flood.py"
else
	echo "## Floods: XDP against accept-level refusal: skipped (needs root and hping3)"
	echo
fi

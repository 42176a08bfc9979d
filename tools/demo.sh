#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/demo.sh BUILD_DIR - make demo: legacy_server under the shim with
# examples/quickstart.conf (sms: 3 a minute per client), five POST /sms, the
# status codes and the headers of the last answer. Everything it starts, it
# stops; a fresh port and a fresh segment each run, so it shows the same thing
# every time.
#
# The shim, the demo server and the examples come from the build tree
# BUILD_DIR, unless RLSHIM_LIB, RLSHIM_LEGACY and RLSHIM_EXAMPLES name other
# files. `make install` installs a copy as PREFIX/share/rlshim/demo.sh in which
# the marker line below sets them to the installed files.
set -eu
B=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
: # @RLSHIM_INSTALLED_PATHS@
lib=${RLSHIM_LIB:-$top/$B/librlshim.so}
legacy=${RLSHIM_LEGACY:-$top/$B/legacy_server}
examples=${RLSHIM_EXAMPLES:-$top/examples}
# What the first line of output calls them: as before, relative to the tree.
shown_lib=${RLSHIM_LIB:-$B/librlshim.so}
shown_conf=${RLSHIM_EXAMPLES:-examples}/quickstart.conf
for f in "$lib" "$legacy" "$examples/quickstart.conf"; do
	[ -e "$f" ] || { echo "demo: $f: not found" >&2; exit 1; }
done
tmp=$(mktemp -d)
shm="rlshim-demo-$$"
# A port free on every address; IPv4 only where the host has no IPv6
# (legacy_server falls back the same way).
port=$(python3 -c '
import socket
try:
    s = socket.socket(socket.AF_INET6)
    s.bind(("::", 0))
except OSError:
    s = socket.socket(socket.AF_INET)
    s.bind(("0.0.0.0", 0))
print(s.getsockname()[1])')
pid=""
# Every command here succeeds: under set -e a failing one (a wait on a
# server that exits non-zero) would stop the cleanup half-way and become
# the script's exit status.
cleanup() {
	if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
		wait "$pid" 2>/dev/null || :
	fi
	rm -f "/dev/shm/$shm"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

sed -e "s/^ports *=.*/ports = $port/" -e "s/^shm *=.*/shm = $shm/" \
	"$examples/quickstart.conf" >"$tmp/quickstart.conf"
RLSHIM_CONFIG="$tmp/quickstart.conf" LD_PRELOAD="$lib" \
	"$legacy" -p "$port" >"$tmp/server.log" 2>&1 &
pid=$!
i=0
# A bare connect, not a request: nothing is counted before the demo's own.
until python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1).close()" 2>/dev/null; do
	i=$((i + 1))
	[ "$i" -lt 100 ] || { echo "demo: legacy_server did not start" >&2; cat "$tmp/server.log" >&2; exit 1; }
	sleep 0.05
done

echo "legacy_server on port $port, under LD_PRELOAD=$shown_lib with $shown_conf"
echo
codes=""
for _ in 1 2 3 4 5; do
	code=$(curl -s -D "$tmp/headers" -o "$tmp/body" -w '%{http_code}' \
		-X POST "http://127.0.0.1:$port/sms")
	codes="$codes $code"
done
echo "five POST /sms:$codes"
echo
echo "the last answer:"
tr -d '\r' <"$tmp/headers"
cat "$tmp/body"
echo
echo
echo "what the server logged (the shim's one line, then the requests it saw):"
cat "$tmp/server.log"

#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/deps.sh - the Debian 12 packages that building and testing rlshim need.
#
#   tools/deps.sh          install what is missing (as root), else print the
#                          one apt-get line to run and exit 1
#   tools/deps.sh --check  only say what is missing (exit 1 if anything is)
#   tools/deps.sh --list   print the package list
set -eu

PKGS="gcc make pkg-config libc6-dev
libcmocka-dev libinih-dev libhiredis-dev
libbpf-dev libelf-dev zlib1g-dev linux-libc-dev
clang llvm libclang-rt-14-dev bpftool
redis-server redis-tools nginx lighttpd busybox apache2 python3 curl wrk
iproute2 procps psmisc hping3 valgrind strace python3-prometheus-client
groff-base man-db"

missing=""
for p in $PKGS; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$st" in
	*" installed") ;;
	*) missing="$missing $p" ;;
	esac
done

case "${1:-}" in
--list) echo $PKGS; exit 0 ;;
--check)
	[ -z "$missing" ] && exit 0
	echo "missing Debian packages:$missing" >&2
	exit 1 ;;
esac

[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
	echo "rlshim: missing Debian packages; run as root:" >&2
	echo "  apt-get install -y --no-install-recommends$missing" >&2
	exit 1
fi

echo "rlshim: installing Debian packages:$missing" >&2
# Packages such as nginx, apache2 and redis-server start their service on
# install; keep them from binding ports here (the tests start their own
# instances).
policy=/usr/sbin/policy-rc.d
had_policy=0
[ -e "$policy" ] && had_policy=1
if [ "$had_policy" = 0 ]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 755 "$policy"
fi
restore() { if [ "$had_policy" = 0 ]; then rm -f "$policy"; fi; }
trap restore EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends $missing >/dev/null 2>&1 || {
	apt-get update -q >/dev/null 2>&1 || true
	apt-get install -y -q --no-install-recommends $missing
}

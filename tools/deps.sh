#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/deps.sh - the Debian 12 packages that building, testing and packaging
# rlshim need.
#
#   tools/deps.sh          install what is missing (as root), else print the
#                          one apt-get line to run and exit 1
#   tools/deps.sh --check  only say what is missing (exit 1 if anything is)
#   tools/deps.sh --list   print the package list
#
# Exit status: 0 when everything is installed (already, or now); 1 when
# something is missing and cannot be installed here (not root, or apt-get
# failed: one message on stderr says which packages and what to run).
#
# While it installs, /usr/sbin/policy-rc.d exits 101 so that no package
# starts its service; a policy-rc.d that was there before is left as it is,
# one this script wrote is removed when it ends, whatever happens.
# RLSHIM_POLICY_RC_D names another file to use instead (the tests do, with
# stand-in apt-get and dpkg-query first on PATH).
set -eu

PKGS="gcc make pkg-config libc6-dev
libcmocka-dev libinih-dev libhiredis-dev
libbpf-dev libelf-dev zlib1g-dev linux-libc-dev
clang llvm libclang-rt-14-dev bpftool
dpkg-dev debhelper fakeroot lintian git
redis-server redis-tools nginx lighttpd busybox apache2 apache2-utils python3 curl wrk
iproute2 procps psmisc hping3 valgrind strace python3-prometheus-client systemd
groff-base man-db mandoc shellcheck prometheus python3-yaml
openssl lighttpd-mod-openssl php-cli php-fpm libapache2-mod-php
webfs h2o gunicorn nodejs chromium"

# webfs, h2o and nodejs are servers the integration tests run under the shim
# (tests/integration/servers.py; test_tls.py shows that Node.js's HTTPS
# keeps accept-level limits, said once: NodeSource's nodejs, where it is
# installed, serves as well as Debian's).
# chromium: test_features.py loads a 429 in headless Chromium, as a person's
# browser would (it must show the HTML page, not the JSON).
# prometheus is there for its promtool (test_examples.py checks the alert
# rules with it, and reads them with python3-yaml): 19 MB to download, 96 MB
# installed, its service kept from starting like the others' (below).

# The packages of "$@" that dpkg does not have installed, each after a space.
not_installed() {
	for p in "$@"; do
		st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
		case "$st" in
		*" installed") ;;
		*) printf ' %s' "$p" ;;
		esac
	done
}

missing=$(not_installed $PKGS)

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
policy=${RLSHIM_POLICY_RC_D:-/usr/sbin/policy-rc.d}
had_policy=0
if [ -e "$policy" ] || [ -L "$policy" ]; then had_policy=1; fi
# Every command of the EXIT trap succeeds: under set -e a failing one would
# become the script's exit status (make stopped with "Error 1" that way).
restore() { if [ "$had_policy" = 0 ]; then rm -f "$policy"; fi; }
trap restore EXIT
if [ "$had_policy" = 0 ]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 755 "$policy"
fi
export DEBIAN_FRONTEND=noninteractive
failed() {
	echo "rlshim: $1; the Debian packages still missing:$missing" >&2
	echo "  fix what apt-get said above, then run as root:" >&2
	echo "  apt-get update && apt-get install -y --no-install-recommends$missing" >&2
	exit 1
}
# Quietly first; on failure the package lists may be stale: update, and
# try again with apt-get's messages shown.
if ! apt-get install -y --no-install-recommends $missing >/dev/null 2>&1; then
	apt-get update -q >/dev/null 2>&1 || true
	if ! apt-get install -y -q --no-install-recommends $missing; then
		failed "apt-get install failed"
	fi
fi
# apt-get said yes: check that it did install them.
still=$(not_installed $missing)
if [ -n "$still" ]; then
	missing=$still
	failed "apt-get install succeeded but did not install everything"
fi
exit 0

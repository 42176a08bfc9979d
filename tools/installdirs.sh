#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/installdirs.sh - the directories make install creates, so that make
# uninstall removes them again and no others (a PREFIX it made goes with it;
# /usr/local/share/man, there before, stays).
#
#   installdirs.sh missing INST FILE...   before installing: the directories
#                                         that will hold FILE... (relative to
#                                         INST) and do not exist yet, INST
#                                         itself included ("."), one a line
#   installdirs.sh record INST NEW        after: NEW's lines added to
#                                         INST/share/rlshim/installed-dirs
#   installdirs.sh remove INST LIST       each directory LIST names (the
#                                         manifest's text), deepest first,
#                                         removed if it is empty
#
# make install runs it only without DESTDIR: a staged tree is the
# packager's, made and removed as a whole.
set -eu
what=$1 inst=$2
shift 2
manifest=$inst/share/rlshim/installed-dirs
case $what in
missing)
	for f; do
		d=$(dirname "$f")
		while [ "$d" != . ] && [ ! -d "$inst/$d" ]; do
			echo "$d"
			d=$(dirname "$d")
		done
	done | sort -u
	[ -d "$inst" ] || echo .
	;;
record)
	{ [ ! -f "$manifest" ] || cat "$manifest"; cat "$1"; } | sort -u >"$manifest.tmp"
	chmod 0644 "$manifest.tmp"
	mv -f "$manifest.tmp" "$manifest"
	;;
remove)
	# Reverse order puts a directory after those under it ("." last).
	printf '%s\n' "$1" | sort -r | while read -r d; do
		p=$inst/$d
		[ "$d" != . ] || p=$inst
		if [ -n "$d" ] && [ -d "$p" ]; then
			rmdir --ignore-fail-on-non-empty "$p"
		fi
	done
	;;
*)
	echo "installdirs.sh: missing, record or remove, not '$what'" >&2
	exit 2
	;;
esac

#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/run.sh - run test programs, pass their output through, and end with
# one line "N passed, N failed".
#
# Each argument is one test program (make's .d files are skipped) (a cmocka binary, or a script that
# prints cmocka-style "[  PASSED  ] N test(s)." / "[  FAILED  ] N test(s)"
# summaries). A program that exits non-zero without a FAILED summary (a
# crash, a timeout) counts as one failure.
set -u
passed=0
failed=0
: "${RL_TEST_TIMEOUT:=900}"
for t in "$@"; do
	case $t in
	*.d) continue ;; # the compiler's dependency files beside the binaries,
	                 # so that build/tests/test_* runs every test
	esac
	log=$(mktemp)
	echo "==> $t"
	timeout -k 10 "$RL_TEST_TIMEOUT" sh -c "$t" >"$log" 2>&1
	rc=$?
	cat "$log"
	p=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
	f=$(sed -n 's/^\[  FAILED  \] \([0-9][0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "[  FAILED  ] 1 test(s): $t exited with status $rc"
		f=1
	fi
	passed=$((passed + p))
	failed=$((failed + f))
	rm -f "$log"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

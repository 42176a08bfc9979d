#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/fuzz/run.sh SECONDS TARGET... - run each libFuzzer target for SECONDS
# from its seed corpus (tests/fuzz/corpus_NAME, read only; what it finds new
# goes to a scratch directory). Prints cmocka-style lines for tests/run.sh.
set -u
secs=$1
shift
passed=0
failed=0
for f in "$@"; do
	name=$(basename "$f")
	corpus="$(dirname "$0")/corpus_${name#fuzz_}"
	scratch=$(mktemp -d)
	log=$(mktemp)
	echo "[ RUN      ] $name for ${secs}s"
	if (cd "$scratch" && "$OLDPWD/$f" -max_total_time="$secs" \
		-print_final_stats=1 "$scratch" "$OLDPWD/$corpus") >"$log" 2>&1; then
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
		echo "[       OK ] $name: $runs inputs, no crash, no disagreement"
		passed=$((passed + 1))
	else
		tail -30 "$log"
		ls "$scratch"/crash-* 2>/dev/null
		echo "[  FAILED  ] $name"
		failed=$((failed + 1))
	fi
	rm -rf "$scratch" "$log"
done
echo "[  PASSED  ] $passed test(s)."
[ "$failed" -eq 0 ] || { echo "[  FAILED  ] $failed test(s), listed above"; exit 1; }

#!/bin/sh
# SPDX-License-Identifier: MIT
#
# check-selfcalls.sh LIB - fail if LIB relocates against a name it exports.
#
# Inside librlshim.so an exported name is one of the shim's hooks: a call
# to read() through the PLT (a JUMP_SLOT), or read's address taken through
# the GOT, binds to the hook itself, not to libc. The shim's own code calls
# through struct rl_sys (src/core/sys.h) instead; this is the proof.
set -eu
lib=$1

exported=$(readelf --dyn-syms -W "$lib" |
	awk '($5 == "GLOBAL" || $5 == "WEAK") && $7 != "UND" {
		n = $8; sub(/@.*/, "", n); print n }' | sort -u)
# "offset info type value name + addend": the relocations with a symbol.
relocs=$(readelf -rW "$lib" |
	awk '$3 ~ /^R_/ && NF >= 7 { n = $5; sub(/@.*/, "", n); print $3, n }' |
	sort -u)

bad=$(printf '%s\n' "$relocs" | while read -r type name; do
	[ -n "$name" ] || continue
	if printf '%s\n' "$exported" | grep -qx -- "$name"; then
		echo "$type $name"
	fi
done)

[ -z "$bad" ] && exit 0

printf '%s\n' "$bad" | while read -r type name; do
	callers=$(objdump -d --no-show-raw-insn "$lib" |
		awk -v s="<$name@plt>" '/^[0-9a-f]+ <.*>:$/ { fn = $2 }
			($0 ~ /call|jmp/) && index($0, s) { gsub(/[<>:]/, "", fn); print fn }' |
		sort -u | tr '\n' ' ')
	echo "$lib: calls its own hook '$name' ($type)${callers:+ from: $callers}" >&2
done
echo "$lib: the shim's code must call the system through rl_sys" \
	"(src/core/sys.h), never by a name it exports" >&2
exit 1

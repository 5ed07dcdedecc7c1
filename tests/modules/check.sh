#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# check.sh OUT KDIR [KDIR_OTHER]
#
# Sanity-checks the modules built by this directory's Makefile: the symbols
# each module is meant to exercise are undefined (UND), modinfo carries the
# intended license / import_ns / depends / vermagic, and __versions holds,
# for every undefined symbol, the CRC that the exporter's Module.symvers
# lists.  Needs readelf (binutils) and modinfo/modprobe (kmod).
set -eu

out=${1:?usage: check.sh OUT KDIR [KDIR_OTHER]}
kdir=${2:?usage: check.sh OUT KDIR [KDIR_OTHER]}
kdir_other=${3:-}
fails=0

fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
ok() { echo "ok:   $*"; }

uts_release() {
	sed -n 's/.*UTS_RELEASE "\(.*\)"/\1/p' "$1/include/generated/utsrelease.h"
}

und_syms() {	# names of undefined symbols in a .ko
	readelf -sW "$1" | awk '$7 == "UND" && $8 != "" { print $8 }' | sort -u
}

expect_und() {	# ko sym...
	ko=$1; shift
	und=$(und_syms "$ko")
	for s in "$@"; do
		if printf '%s\n' "$und" | grep -qx "$s"; then
			ok "$(basename "$ko"): $s is UND"
		else
			fail "$(basename "$ko"): $s is not an undefined symbol"
		fi
	done
}

expect_field() {	# ko field expected ('' = must be absent)
	got=$(modinfo -F "$2" "$1" | tr '\n' ' ' | sed 's/ *$//')
	if [ "$got" = "$3" ]; then
		ok "$(basename "$1"): $2='$got'"
	else
		fail "$(basename "$1"): $2='$got', expected '$3'"
	fi
}

expect_vermagic() {	# ko release
	got=$(modinfo -F vermagic "$1" | cut -d' ' -f1)
	if [ "$got" = "$2" ]; then
		ok "$(basename "$1"): vermagic release $got"
	else
		fail "$(basename "$1"): vermagic release '$got', expected '$2'"
	fi
}

# Every UND symbol must have a __versions entry whose CRC equals the one in
# the given Module.symvers files (first match wins).
expect_crcs() {	# ko symvers...
	ko=$1; shift
	before=$fails
	vers=$(modprobe --dump-modversions "$ko")
	for s in $(und_syms "$ko"); do
		want=$(awk -F'\t' -v s="$s" '$2 == s { print $1; exit }' "$@")
		got=$(printf '%s\n' "$vers" | awk -F'\t' -v s="$s" '$2 == s { print $1; exit }')
		if [ -z "$want" ]; then
			fail "$(basename "$ko"): $s not found in $*"
		elif [ -z "$got" ]; then
			fail "$(basename "$ko"): no __versions entry for $s"
		elif [ $((want)) -ne $((got)) ]; then
			fail "$(basename "$ko"): __versions CRC of $s is $got, Module.symvers says $want"
		fi
	done
	[ "$fails" -ne "$before" ] ||
		ok "$(basename "$ko"): __versions CRCs of all $(und_syms "$ko" | wc -l) UND symbols match"
}

# The premises the modules rely on, read from the reference Module.symvers.
symvers=$kdir/Module.symvers
if awk -F'\t' '$2 == "ktime_get" && $3 == "vmlinux" && $4 == "EXPORT_SYMBOL_GPL" { f = 1 } END { exit !f }' "$symvers"; then
	ok "Module.symvers: ktime_get is a vmlinux EXPORT_SYMBOL_GPL"
else
	fail "Module.symvers: ktime_get is not a vmlinux EXPORT_SYMBOL_GPL"
fi
if awk -F'\t' '$2 == "dma_buf_put" && $3 == "vmlinux" && $5 == "DMA_BUF" { f = 1 } END { exit !f }' "$symvers"; then
	ok "Module.symvers: dma_buf_put is exported by vmlinux in namespace DMA_BUF"
else
	fail "Module.symvers: dma_buf_put is not in namespace DMA_BUF"
fi

release=$(uts_release "$kdir")
plain_symvers=$out/work/main/Module.symvers

for m in bl_plain bl_user bl_proprietary bl_ns_missing bl_ns_import; do
	if [ ! -f "$out/$m.ko" ]; then
		fail "$out/$m.ko is missing (run make first)"
		continue
	fi
	expect_vermagic "$out/$m.ko" "$release"
	expect_crcs "$out/$m.ko" "$symvers" "$plain_symvers"
done

ko=$out/bl_plain.ko
expect_und "$ko" _printk kstrdup kfree strlen kmalloc_caches ktime_get
expect_field "$ko" license GPL
if readelf -sW "$ko" | awk '$7 != "UND" && $8 == "__ksymtab_bl_plain_hello" { f = 1 } END { exit !f }'; then
	ok "bl_plain.ko: exports bl_plain_hello (__ksymtab_bl_plain_hello)"
else
	fail "bl_plain.ko: no __ksymtab_bl_plain_hello"
fi

ko=$out/bl_user.ko
expect_und "$ko" bl_plain_hello _printk kstrdup kfree
expect_field "$ko" license GPL
expect_field "$ko" depends bl_plain

ko=$out/bl_proprietary.ko
expect_und "$ko" ktime_get _printk
expect_field "$ko" license Proprietary

ko=$out/bl_ns_missing.ko
expect_und "$ko" dma_buf_put _printk
expect_field "$ko" license GPL
expect_field "$ko" import_ns ""

ko=$out/bl_ns_import.ko
expect_und "$ko" dma_buf_put _printk
expect_field "$ko" license GPL
expect_field "$ko" import_ns DMA_BUF

ko=$out/other-release/bl_plain.ko
if [ -f "$ko" ] && [ -n "$kdir_other" ] && [ -d "$kdir_other" ]; then
	other=$(uts_release "$kdir_other")
	expect_vermagic "$ko" "$other"
	[ "$other" != "$release" ] || fail "other-release: same release as KDIR ($release)"
	expect_und "$ko" _printk kstrdup kfree strlen ktime_get
	expect_crcs "$ko" "$kdir_other/Module.symvers"
else
	echo "skip: other-release/bl_plain.ko (run make other-release)"
fi

if [ "$fails" -ne 0 ]; then
	echo "$fails check(s) failed" >&2
	exit 1
fi
echo "all checks passed"

#!/bin/sh
# run.sh - bl-modload test driver: C unit tests, then integration tests that
# run the dynamically linked loader under the LD_PRELOAD trap (trap.so) with
# fake module files and a fake sysfs tree. Prints "ok - name" /
# "FAIL - name: reason" per test and a final "N passed, N failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${BL_BIN:-$HERE/bl-modload.dyn}
TRAP=${BL_TRAP_PRELOAD:-$HERE/trap.so}
STATIC=${BL_STATIC:-}
pass=0
fail=0

ok() { echo "ok - $1"; pass=$((pass + 1)); }
bad() { echo "FAIL - $1: $2"; fail=$((fail + 1)); }
# check NAME REASON SHELL-CONDITION: ok if the condition holds
check() {
	if eval "$3"; then ok "$1"; else bad "$1" "$2"; fi
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# ---------------------------------------------------------------- unit tests
unit_out=$("$HERE/unit" 2>&1)
unit_rc=$?
echo "$unit_out" | grep -E '^(ok|FAIL) - '
pass=$((pass + $(echo "$unit_out" | grep -c '^ok - ')))
fail=$((fail + $(echo "$unit_out" | grep -c '^FAIL - ')))
if [ $unit_rc -ne 0 ] && ! echo "$unit_out" | grep -q '^FAIL - '; then
	bad "unit tests" "unit binary exited $unit_rc"
fi

# ---------------------------------------------------------------- helpers
ROOT=$(mktemp -d /tmp/bl-modload-test.XXXXXX)
trap 'rm -rf "$ROOT"' EXIT INT TERM

# new TESTDIR: fresh module dir, fake sysfs, empty trap log and plan
new() {
	T=$ROOT/$1
	mkdir -p "$T/mods" "$T/sys/module" "$T/pids"
	: >"$T/log"
	: >"$T/conf"
	printf '# test plan\n\nbootlink-plan 1\n' >"$T/plan"
}
# mod NAME DEPS [PARAMS...]: fake .ko file plus its plan line
mod() {
	_m=$1 _d=$2
	shift 2
	printf '\177ELF fake module %s\n' "$_m" >"$T/mods/$_m.ko"
	if [ $# -gt 0 ]; then
		printf '%s\t%s  %s   %s\n' "$_m" "$T/mods/$_m.ko" "$_d" "$*" >>"$T/plan"
	else
		printf '%s %s %s\n' "$_m" "$T/mods/$_m.ko" "$_d" >>"$T/plan"
	fi
}
conf() { echo "$*" >>"$T/conf"; }
live() { mkdir -p "$T/sys/module/$1" && echo "${2:-live}" >"$T/sys/module/$1/initstate"; }
# run ARGS...: the loader under the trap; sets rc, output in $T/out, $T/err
run() {
	BL_TRAP_CONF=$T/conf BL_TRAP_LOG=$T/log BL_TRAP_DIR=$T/pids BL_SYSFS=$T/sys \
		LD_PRELOAD=$TRAP "$BIN" --sysfs "$T/sys" "$@" "$T/plan" >"$T/out" 2>"$T/err"
	rc=$?
}
# field NAME KEY: KEY=value of NAME's LOAD line
field() {
	awk -v n="$1" -v k="$2" '$1 == "LOAD" && $2 == "name=" n {
		for (i = 3; i <= NF; i++) if (index($i, k "=") == 1) print substr($i, length(k) + 2)
	}' "$T/out"
}
res() { field "$1" result; }
begins() { grep -c "^BEGIN $1 " "$T/log"; }
summary_has() { grep -q "^SUMMARY .*$1" "$T/out"; }
# every module of the plan was called exactly once (BEGIN lines of the trap)
all_once() {
	for _m in "$@"; do
		[ "$(begins "$_m")" = 1 ] || { echo "  $_m called $(begins "$_m") times"; return 1; }
	done
}
# every call started after every dependency's successful call ended
order_ok() {
	awk 'FNR == NR { if ($1 == "CALL" && $7 == 0) end[$2] = $5
			 if ($1 == "BEGIN") start[$2] = $4; next }
	     /^#/ || /^bootlink-plan/ || NF < 3 || $3 == "-" { next }
	     { m = $1; gsub("-", "_", m); if (!(m in start)) next
	       n = split($3, d, ",")
	       for (i = 1; i <= n; i++) { x = d[i]; gsub("-", "_", x)
		 if ((x in end) && start[m] < end[x]) { if (bad++ < 5) print "  " m " started before " x " ended" } } }
	     END { exit bad > 0 }' "$T/log" "$T/plan"
}
# largest number of trap calls in progress at once
max_overlap() {
	awk '$1 == "CALL" { print $4, 1; print $5, -1 }' "$T/log" | sort -n -k1,1 -k2,2n |
		awk '{ c += $2; if (c > m) m = c } END { print m + 0 }'
}
formats_ok() {
	grep -v -E '^LOAD name=[A-Za-z0-9_-]+ worker=-?[0-9]+ start_us=[0-9]+ end_us=[0-9]+ result=(loaded|exists|already-live|builtin|failed|timeout|worker-died) errno=[0-9]+ decompress=(kernel|user|none)$' "$T/out" |
		grep -v -E '^LOAD name=[A-Za-z0-9_-]+ worker=-1 start_us=[0-9]+ end_us=[0-9]+ result=dep-failed errno=0 decompress=none cause=[A-Za-z0-9_-]+$' |
		grep -v -E '^SUMMARY modules=[0-9]+ loaded=[0-9]+ exists=[0-9]+ already-live=[0-9]+ builtin=[0-9]+ failed=[0-9]+ dep-failed=[0-9]+ timeout=[0-9]+ worker-died=[0-9]+ workers=[0-9]+ wall_us=[0-9]+$' |
		grep -q . && return 1
	[ "$(grep -c '^SUMMARY ' "$T/out")" = 1 ] && tail -n 1 "$T/out" | grep -q '^SUMMARY '
}

# ---------------------------------------------------------------- tests
new basic
mod a -
mod b a 'foo=1 bar="x y"'
mod c a
mod d b,c
mod e -
mod f-x d,e
conf "b delay_ms=50"
conf "c delay_ms=80"
run -j 3
check "basic: exit 0" "rc=$rc $(cat "$T/err")" '[ "$rc" = 0 ]'
check "basic: every module called exactly once" "$(all_once a b c d e f_x)" 'all_once a b c d e f_x'
check "basic: each module started after all its deps were live" "order" 'order_ok'
check "basic: one LOAD line per module, formats exact" "$(cat "$T/out")" 'formats_ok'
check "basic: SUMMARY counts" "$(tail -n 1 "$T/out")" ' summary_has "modules=6 loaded=6 exists=0 already-live=0 builtin=0 failed=0 dep-failed=0 timeout=0 worker-died=0 workers=3 "'
check "basic: params with spaces passed verbatim" "$(grep '^CALL b ' "$T/log")" ' grep -q '\''^CALL b .* params=foo=1 bar="x y"$'\'' "$T/log"'
w=$(field d worker)
check "basic: worker index in 0..N-1" "worker=$w" '[ "$w" -ge 0 ] && [ "$w" -le 2 ]'
check "basic: result loaded, decompress=none" "$(grep 'name=a ' "$T/out")" ' [ "$(res a)" = loaded ] && [ "$(field a decompress)" = none ]'

new parallel
for i in 1 2 3 4 5 6 7 8; do mod "p$i" -; conf "p$i delay_ms=200"; done
run -j 4
ov=$(max_overlap)
check "parallel: -j4, 8 modules of 200 ms: exactly 4 overlap" "max overlap $ov, rc=$rc" '[ "$ov" = 4 ]'
check "parallel: at most 4 worker processes" "$(awk '$1=="BEGIN"{print $3}' "$T/log" | sort -u | wc -l) pids" ' [ "$(awk '\''$1=="BEGIN"{print $3}'\'' "$T/log" | sort -u | wc -l)" -le 4 ]'
: >"$T/log"
rm -rf "$T/sys/module"/*
run -j 1
ov=$(max_overlap)
check "parallel: -j1 is serial" "max overlap $ov" '[ "$ov" = 1 ]'

new many
# 150 modules, file order reversed (dependents first): readiness comes from DEPS
i=150
while [ $i -ge 1 ]; do
	if [ $i -gt 3 ]; then mod "m$i" "m$((i - 1)),m$((i / 2)),m$((i / 3))"; else mod "m$i" -; fi
	i=$((i - 1))
done
run -j 8
names=$(i=1; while [ $i -le 150 ]; do printf 'm%d ' $i; i=$((i + 1)); done)
# shellcheck disable=SC2086
check "many: 150 modules in reverse file order, each called once" "rc=$rc" 'all_once $names'
check "many: dependency order respected" "order" 'order_ok'
check "many: exit 0, loaded=150" "$(tail -n 1 "$T/out")" 'summary_has "loaded=150 "'

new failure
mod a -
mod b a
mod c b
mod e -
mod d a,e
mod f e
mod g -
conf "a rc=8"
conf "e delay_ms=100"
run -j 2
check "failure: exit 1" "rc=$rc" '[ "$rc" = 1 ]'
check "failure: failed module reports errno" "$(grep 'name=a ' "$T/out")" ' [ "$(res a)" = failed ] && [ "$(field a errno)" = 8 ] && [ "$(field a worker)" -ge 0 ]'
check "failure: transitive dependents dep-failed with cause" "$(grep dep-failed "$T/out")" ' [ "$(res b)$(res c)$(res d)" = dep-faileddep-faileddep-failed ] &&  [ "$(field b cause)$(field c cause)$(field d cause)" = aaa ] && [ "$(field c worker)" = -1 ]'
check "failure: dep-failed modules never called" "calls b=$(begins b) c=$(begins c) d=$(begins d)" ' [ "$(begins b)$(begins c)$(begins d)" = 000 ]'
check "failure: unrelated modules still load" "$(res e) $(res f) $(res g)" ' [ "$(res e)$(res f)$(res g)" = loadedloadedloaded ]'
check "failure: SUMMARY" "$(tail -n 1 "$T/out")" 'summary_has "loaded=3 exists=0 already-live=0 builtin=0 failed=1 dep-failed=3 "'
check "failure: formats exact" "$(cat "$T/out")" 'formats_ok'

new missing
mod a -
mod b a
mod c -
rm "$T/mods/a.ko"
run
check "missing file: failed ENOENT, never called" "$(grep 'name=a ' "$T/out")" ' [ "$(res a)" = failed ] && [ "$(field a errno)" = 2 ] && [ "$(begins a)" = 0 ]'
check "missing file: dependent dep-failed, others load, exit 1" "rc=$rc" ' [ "$rc" = 1 ] && [ "$(res b)" = dep-failed ] && [ "$(res c)" = loaded ]'

new cycle
mod a b
mod b a
mod c -
run
check "cycle: exit 2, nothing called" "rc=$rc log=$(wc -l <"$T/log")" '[ "$rc" = 2 ] && [ ! -s "$T/log" ]'
check "cycle: error names file, line and cycle" "$(cat "$T/err")" ' grep -qx "bl-modload: $T/plan:4: dependency cycle: a -> b -> a" "$T/err"'
check "cycle: nothing on stdout" "$(cat "$T/out")" '[ ! -s "$T/out" ]'

new notinplan
mod a -
mod b a,ghost
run
check "dep not in plan: exit 2, nothing called" "rc=$rc" '[ "$rc" = 2 ] && [ ! -s "$T/log" ]'
check "dep not in plan: message" "$(cat "$T/err")" ' grep -qx "bl-modload: $T/plan:5: module b depends on ghost, which is not in the plan and not loaded" "$T/err"'

new extlive
live ext_one
mkdir -p "$T/sys/module/builtin_dep"
mod a ext-one,builtin-dep
run
check "dep outside the plan but live/builtin: accepted" "rc=$rc $(cat "$T/err")" ' [ "$rc" = 0 ] && [ "$(res a)" = loaded ]'

new already
mod a -
mod my-mod -
mod b a,my-mod
live a
live my_mod
run
check "already-live: skipped, not called" "$(cat "$T/out")" ' [ "$(res a)" = already-live ] && [ "$(begins a)" = 0 ] && [ "$(field a worker)" = -1 ]'
check "already-live: '-' in name matches sysfs '_' form" "$(res my-mod)" ' [ "$(res my-mod)" = already-live ] && [ "$(begins my_mod)" = 0 ]'
check "already-live: dependents load, exit 0" "rc=$rc" '[ "$rc" = 0 ] && [ "$(res b)" = loaded ]'
check "already-live: SUMMARY" "$(tail -n 1 "$T/out")" 'summary_has "loaded=1 exists=0 already-live=2 "'

new builtin
mod a -
mod b a
mkdir -p "$T/sys/module/a"
run
check "builtin: skipped, not called, dependents load" "$(cat "$T/out")" ' [ "$(res a)" = builtin ] && [ "$(begins a)" = 0 ] && [ "$(res b)" = loaded ] && [ "$rc" = 0 ]'

new coming
mod c -
mod d c
mod e -
live c coming
t0=$(now_ms)
(sleep 0.3; echo live >"$T/sys/module/c/initstate") &
run
wait
t1=$(now_ms)
check "coming: waited until live, not called" "$(cat "$T/out")" ' [ "$(res c)" = already-live ] && [ "$(begins c)" = 0 ] && [ "$rc" = 0 ]'
check "coming: waited ~300 ms, dependent started after it turned live" "$(cat "$T/out")" \
	'[ "$(res d)" = loaded ] && [ $((t1 - t0)) -ge 300 ] && [ $(($(field c end_us) - $(field c start_us))) -ge 250000 ] && [ "$(field d start_us)" -ge "$(field c end_us)" ]'
check "coming: others not held back" "$(res e)" '[ "$(res e)" = loaded ]'

new comingstuck
mod c -
mod d c
live c coming
run -t 1
check "coming that never turns live: timeout, not called" "$(cat "$T/out")" ' [ "$(res c)" = timeout ] && [ "$(begins c)" = 0 ] && [ "$(res d)" = dep-failed ] && [ "$rc" = 1 ]'

new timeout
mod a -
mod b a
mod c -
conf "a delay_ms=3000"
t0=$(now_ms)
run -t 1 -j 2
t1=$(now_ms)
check "timeout: result timeout, ETIMEDOUT" "$(grep 'name=a ' "$T/out")" ' [ "$(res a)" = timeout ] && [ "$(field a errno)" = 110 ]'
check "timeout: dependents dep-failed, others load, exit 1" "rc=$rc" ' [ "$rc" = 1 ] && [ "$(res b)" = dep-failed ] && [ "$(field b cause)" = a ] && [ "$(res c)" = loaded ]'
check "timeout: loader returns within ~2 s" "took $((t1 - t0)) ms" '[ $((t1 - t0)) -lt 2500 ]'
check "timeout: never retried" "$(begins a) calls" '[ "$(begins a)" = 1 ]'
check "timeout: SUMMARY" "$(tail -n 1 "$T/out")" 'summary_has "failed=0 dep-failed=1 timeout=1 worker-died=0 "'

new killed
mod a -
mod b a
mod c -
mod d c
mod e -
conf "a delay_ms=5000"
conf "c delay_ms=300"
conf "e delay_ms=300"
BL_TRAP_CONF=$T/conf BL_TRAP_LOG=$T/log BL_TRAP_DIR=$T/pids BL_SYSFS=$T/sys \
	LD_PRELOAD=$TRAP "$BIN" --sysfs "$T/sys" -j 2 "$T/plan" >"$T/out" 2>"$T/err" &
lpid=$!
i=0
while [ ! -s "$T/pids/a.pid" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i + 1)); done
t0=$(now_ms)
if [ -s "$T/pids/a.pid" ]; then kill -9 "$(cat "$T/pids/a.pid")"; fi
wait $lpid
rc=$?
t1=$(now_ms)
check "worker killed: result worker-died" "$(cat "$T/out")" '[ "$(res a)" = worker-died ]'
check "worker killed: no retry (one call)" "$(begins a) calls" '[ "$(begins a)" = 1 ] && ! grep -q '\''^CALL a '\'' "$T/log"'
check "worker killed: dependents dep-failed" "$(res b)" '[ "$(res b)" = dep-failed ] && [ "$(begins b)" = 0 ]'
check "worker killed: other modules still load" "$(res c) $(res d) $(res e)" ' [ "$(res c)$(res d)$(res e)" = loadedloadedloaded ]'
check "worker killed: exit 1, no waiting for the dead load" "rc=$rc took $((t1 - t0)) ms" ' [ "$rc" = 1 ] && [ $((t1 - t0)) -lt 2000 ]'
check "worker killed: noted on stderr" "$(cat "$T/err")" 'grep -q '\''^bl-modload: worker [0-9] died while loading a$'\'' "$T/err"'

new dryrun
mod a -
mod b a
mod c b 'x=1 y=2'
run -n
check "dry run: loads nothing" "rc=$rc log=$(wc -l <"$T/log")" '[ "$rc" = 0 ] && [ ! -s "$T/log" ]'
check "dry run: prints the schedule" "$(cat "$T/out")" ' [ "$(grep -c '\''^PLAN order='\'' "$T/out")" = 3 ] && grep -q '\''^PLAN order=2 name=c sysfs=absent deps=b path=.* params=x=1 y=2$'\'' "$T/out"'

new eexist
mod a -
mod b a
conf "a rc=EEXIST"
run
check "EEXIST: result exists, exit 0" "rc=$rc $(grep 'name=a ' "$T/out")" ' [ "$rc" = 0 ] && [ "$(res a)" = exists ] && [ "$(field a errno)" = 17 ] && [ "$(res b)" = loaded ]'
check "EEXIST: SUMMARY" "$(tail -n 1 "$T/out")" 'summary_has "loaded=1 exists=1 "'

new compressed
printf '\177ELF compressed test module payload\n' >"$T/payload"
size=$(wc -c <"$T/payload")
xz -c "$T/payload" >"$T/mods/kx.ko.xz"
gzip -c "$T/payload" >"$T/mods/ug.ko.gz"
xz -c "$T/payload" >"$T/mods/ux.ko.xz"
echo "kx $T/mods/kx.ko.xz -" >>"$T/plan"
echo "ux $T/mods/ux.ko.xz -" >>"$T/plan"
echo "ug $T/mods/ug.ko.gz ux" >>"$T/plan"
have_zstd=0
if command -v zstd >/dev/null 2>&1; then
	have_zstd=1
	zstd -q -c "$T/payload" >"$T/mods/uz.ko.zst"
	echo "uz $T/mods/uz.ko.zst -" >>"$T/plan"
	conf "uz nocompress=1"
fi
conf "ux nocompress=1"
conf "ug nocompress=1"
run -j 2
check "compressed: .ko.xz gets MODULE_INIT_COMPRESSED_FILE" "$(grep ' kx ' "$T/log")" ' grep -q '\''^CALL kx [0-9]* [0-9]* [0-9]* 4 0 finit '\'' "$T/log"'
check "compressed: decompress=kernel reported" "$(grep 'name=kx ' "$T/out")" ' [ "$(res kx)" = loaded ] && [ "$(field kx decompress)" = kernel ]'
check "fallback: EOPNOTSUPP -> init_module with ELF bytes (xz)" "$(grep ' ux ' "$T/log")" ' grep -q '\''^CALL ux [0-9]* [0-9]* [0-9]* 4 95 finit '\'' "$T/log" &&  grep -q "^CALL ux [0-9]* [0-9]* [0-9]* 0 0 init len=$size head=7f454c46 " "$T/log"'
check "fallback: gzip too" "$(grep ' ug ' "$T/log")" ' grep -q "^CALL ug [0-9]* [0-9]* [0-9]* 0 0 init len=$size head=7f454c46 " "$T/log"'
if [ $have_zstd = 1 ]; then
	check "fallback: zstd too" "$(grep ' uz ' "$T/log")" \
		'grep -q "^CALL uz [0-9]* [0-9]* [0-9]* 0 0 init len=$size head=7f454c46 " "$T/log"'
fi
check "fallback: decompress=user reported, exit 0" "$(cat "$T/out")" ' [ "$(field ux decompress)$(field ug decompress)" = useruser ] && [ "$(res ux)" = loaded ] && [ "$rc" = 0 ]'

new forceduser
printf '\177ELF compressed test module payload\n' >"$T/payload"
size=$(wc -c <"$T/payload")
xz -c "$T/payload" >"$T/mods/fx.ko.xz"
echo "fx $T/mods/fx.ko.xz -" >>"$T/plan"
mod p -
run --decompress user
# (the trap names an init_module by its process's last finit_module: none here)
check "--decompress user: no finit_module for a compressed module, init_module with ELF bytes" "$(cat "$T/log")" \
	'! grep -q "^CALL fx .* finit " "$T/log" && grep -q "^CALL [a-z]* [0-9]* [0-9]* [0-9]* 0 0 init len=$size head=7f454c46 " "$T/log" && [ "$(field fx decompress)" = user ] && [ "$(res fx)" = loaded ]'
check "--decompress user: a plain module still goes to finit_module" "$(cat "$T/log")" \
	'grep -q "^CALL p [0-9]* [0-9]* [0-9]* 0 0 finit " "$T/log" && [ "$(field p decompress)" = none ]'

new forcedkernel
printf '\177ELF compressed test module payload\n' >"$T/payload"
xz -c "$T/payload" >"$T/mods/kx.ko.xz"
echo "kx $T/mods/kx.ko.xz -" >>"$T/plan"
conf "kx nocompress=1"
run --decompress kernel
check "--decompress kernel: the kernel's refusal is the result, no user-space fallback" "$(cat "$T/out")" \
	'[ "$(res kx)" = failed ] && [ "$(field kx errno)" = 95 ] && [ "$(field kx decompress)" = kernel ] && ! grep -q "^CALL kx .* init " "$T/log" && [ "$rc" = 1 ]'

new badmode
mod a -
run --decompress sometimes
check "--decompress: a bad value is refused in one line, nothing loaded" "$(cat "$T/err")" \
	'[ "$rc" = 2 ] && [ "$(wc -l <"$T/err")" = 1 ] && grep -q "expected auto, kernel or user" "$T/err" && ! grep -q "^CALL" "$T/log"'

new nofinit
mod a -
conf "a nofinit=1"
run
fsize=$(wc -c <"$T/mods/a.ko")
check "fallback: no finit_module (ENOSYS) -> init_module with the file bytes" "$(cat "$T/log")" \
	'grep -q "^CALL a [0-9]* [0-9]* [0-9]* 0 38 finit " "$T/log" && grep -q "^CALL a [0-9]* [0-9]* [0-9]* 0 0 init len=$fsize head=7f454c46 " "$T/log" && [ "$(res a)" = loaded ] && [ "$(field a decompress)" = none ]'

new badxz
printf 'not xz at all' >"$T/mods/bx.ko.xz"
echo "bx $T/mods/bx.ko.xz -" >>"$T/plan"
conf "bx nocompress=1"
run
check "fallback: corrupt archive fails cleanly (EIO), no init_module" "$(cat "$T/out")" ' [ "$(res bx)" = failed ] && [ "$(field bx errno)" = 5 ] && ! grep -q '\''^CALL bx .* init '\'' "$T/log" && [ "$rc" = 1 ]'

new kmsg
mod a -
mod b a
mod c -
conf "c rc=8"
run --kmsg-file "$T/kmsg" -j 2
kmsg_ok() {
	for _m in a b c; do
		_w=$(field $_m worker) _e=$(field $_m errno)
		[ "$(grep -c "^bootlink: insmod $_m\$" "$T/kmsg")" = 1 ] || return 1
		[ "$(grep -c "^bootlink: insmod-done $_m $_e worker $_w\$" "$T/kmsg")" = 1 ] || return 1
		# the begin marker precedes the done marker
		[ "$(grep -n "^bootlink: insmod $_m\$" "$T/kmsg" | cut -d: -f1)" -lt \
		  "$(grep -n "^bootlink: insmod-done $_m " "$T/kmsg" | cut -d: -f1)" ] || return 1
	done
	[ "$(wc -l <"$T/kmsg")" = 6 ]
}
check "kmsg: 'bootlink: insmod NAME' / 'insmod-done NAME RC worker W' markers" "$(cat "$T/kmsg")" 'kmsg_ok'

new trace
mod a -
mod b a
mod c -
: >"$T/tm"
run --trace-marker "$T/tm" -j 2
check "trace marker: 'bootlink begin NAME' once per call" "$(cat "$T/tm")" ' [ "$(grep -c '\''^bootlink begin [abc]$'\'' "$T/tm")" = 3 ] && [ "$(wc -l <"$T/tm")" = 3 ]'

new quiet
mod a -
run -q
check "-q: no LOAD lines, SUMMARY kept" "$(cat "$T/out")" ' [ "$(grep -c '\''^LOAD '\'' "$T/out")" = 0 ] && summary_has "loaded=1 "'

new usage
mod a -
run -j 0; r1=$rc
run -j 65; r2=$rc
run -t nope; r3=$rc
run --bogus; r4=$rc
"$BIN" >/dev/null 2>&1; r5=$?
"$BIN" "$T/nonexistent" >/dev/null 2>"$T/err2"; r6=$?
check "usage errors exit 2" "$r1 $r2 $r3 $r4 $r5 $r6" '[ "$r1$r2$r3$r4$r5$r6" = 222222 ]'
check "usage: unreadable plan named" "$(cat "$T/err2")" 'grep -q "^bl-modload: $T/nonexistent: cannot open plan: " "$T/err2"'
run -j 64 -t 0.5
check "usage: -j 64 and fractional -t accepted" "rc=$rc" '[ "$rc" = 0 ]'
printf 'bootlink-plan 2\n' >"$T/plan"
run
check "bad header: exit 2 with line" "$(cat "$T/err")" ' [ "$rc" = 2 ] && grep -q "^bl-modload: $T/plan:1: bad header" "$T/err"'

if [ -n "$STATIC" ]; then
	new static
	mod a -
	mod b a
	"$STATIC" -n --sysfs "$T/sys" "$T/plan" >"$T/out" 2>"$T/err"
	rc=$?
	check "static binary: -n works" "rc=$rc $(cat "$T/err")" \
		'[ "$rc" = 0 ] && [ "$(grep -c "^PLAN " "$T/out")" = 2 ]'
	if command -v readelf >/dev/null 2>&1; then
		check "static binary: no ELF interpreter" "$(readelf -l "$STATIC" | grep -i interp)" \
			'! readelf -l "$STATIC" | grep -q "program interpreter"'
	fi
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]

# Sourced by the bench scripts: building, the reference kernel, timing.
# measure CMD...  -> prints "seconds peak_kilobytes" (GNU time), fails loudly
# median N...     -> the median of its arguments
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
BIN=$PWD/target/release/bootlink
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

measure() {
    /usr/bin/time -f "%e %M" -o "$work/.time" "$@" >/dev/null 2>"$work/.err" || { cat "$work/.err" >&2; exit 1; }
    cat "$work/.time"
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
jget() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
# ddlink_caches LD PREFIX PROGRAM [ARGS...]: PROGRAM profiled under the
# loader LD into PREFIX.rec, its File Read Mode cache PREFIX.cache and its
# Skip Mode cache PREFIX.skip with the prelinked images in PREFIX.images
# written (what `write` reported in PREFIX.skip.json), each verified at 0
# differences before anything measures it.
ddlink_caches() {
    local ld=$1 p=$2
    shift 2
    "$BIN" ddlink profile --loader "$ld" -o "$p.rec" "$@" >/dev/null
    "$BIN" ddlink write --loader "$ld" --record "$p.rec" --program "$1" -o "$p.cache" >/dev/null
    "$BIN" ddlink verify --loader "$ld" --cache "$p.cache" "$@" >/dev/null
    "$BIN" ddlink write --json --loader "$ld" --record "$p.rec" --program "$1" -o "$p.skip" --prelink "$p.images" \
        >"$p.skip.json"
    "$BIN" ddlink verify --loader "$ld" --cache "$p.skip" --overlay "$p.images" "$@" >/dev/null
}

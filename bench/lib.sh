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

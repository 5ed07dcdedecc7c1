# Sourced by the scripts and benches that measure a table shown in docs/.
#
#   doc_output FILE NAME FORMAT "$@"
#
# When the script was started with --write-docs as its first argument, or
# with BOOTLINK_WRITE_DOCS=1, it runs itself again (without the flag), shows
# its output as usual and, if it succeeds, writes that output into the
# region NAME of FILE (scripts/doc-region; FORMAT "code" puts it in a
# ``` block, "markdown" takes it as it is), then exits with its status.
# Otherwise doc_output returns and the script runs as always: running a
# bench to check a figure never rewrites the docs by surprise.
# DOC_OUTPUT_THEN, if set, is a command line the shell runs once the region
# is written (another region made from this one: scripts/readme-headline,
# scripts/*-summary; `&&` chains two).
doc_output() {
    local file=$1 name=$2 format=$3
    shift 3
    local want=${BOOTLINK_WRITE_DOCS:-0}
    if [ "${1:-}" = --write-docs ]; then want=1; shift; fi
    [ "$want" = 1 ] || return 0
    local root self out rc
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
    out=$(mktemp)
    BOOTLINK_WRITE_DOCS=0 "$self" "$@" | tee "$out"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -eq 0 ]; then
        if [ "$format" = code ]; then
            { echo '```'; cat "$out"; echo '```'; } | "$root/scripts/doc-region" "$root/$file" "$name" || rc=1
        else
            "$root/scripts/doc-region" "$root/$file" "$name" <"$out" || rc=1
        fi
        if [ "$rc" -eq 0 ] && [ -n "${DOC_OUTPUT_THEN:-}" ]; then
            eval "$DOC_OUTPUT_THEN" || rc=1
        fi
    else
        echo "$0: exit $rc: $file region $name left as it was" >&2
    fi
    rm -f "$out"
    exit "$rc"
}

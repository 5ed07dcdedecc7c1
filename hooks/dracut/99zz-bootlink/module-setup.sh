#!/bin/bash
# shellcheck disable=SC2154 # initdir, kernel, drivers...: set by dracut, which sources this file
# dracut module "zz-bootlink": the kernel modules dracut copies into the
# initramfs must be the bytes `bootlink apply` wrote (the kernel's module
# hash list, or the signatures apply made again, trust only those).
#
#   cp -r hooks/dracut/99zz-bootlink /usr/lib/dracut/modules.d/
#
# dracut sources this file and calls check(), depends(), then, for each
# module in the order of modules.d, install() and installkernel(). The
# number and name put it after every module of dracut's own (the last of
# them, 99fs-lib and 99shutdown, still install kernel modules), so the check
# runs when the module loop's kernel modules are in $initdir. The drivers
# dracut adds after the loop (--drivers, --add-drivers, --force-drivers,
# --filesystems and their dracut.conf forms) are installed here first, as
# dracut would install them, so they are checked too.
#
# When $srcmods (/lib/modules/$kernel, or --kmoddir) holds
# bootlink-applied.json (apply's record: the SHA-256 of each module file as
# apply wrote it), every module in $initdir/lib/modules/$kernel is checked
# against it, and the record is installed beside them. A module the record
# does not list (installed after apply, or a tree never applied), or whose
# bytes differ, is named in one warning line each and kept as it is; with
# BOOTLINK_STRICT=1 dracut then fails. dracut strips unsigned kernel
# modules (do_strip, on by default) after the modules are installed: a
# stripped module is no longer what the hash list holds, so when applied
# modules are unsigned, stripping is turned off for this initramfs and a
# line says so.

# Included whenever the kernel's modules carry apply's record; otherwise
# only when asked for (--add zz-bootlink), to say the tree was never applied.
check() {
    [[ -f ${srcmods:-/lib/modules/$kernel}/bootlink-applied.json ]] && return 0
    return 255
}

depends() {
    return 0
}

# The record's modules as "DIGEST  PATH" lines (apply writes the record with
# serde_json's pretty printer: one module a line, indented by four).
bootlink_record() {
    sed -n '/^  "modules": {/,/^  }/s/^    "\(.*\)": "\([0-9a-f]\{64\}\)",\{0,1\}$/\2  \1/p' "$1"
}

installkernel() {
    local src=${srcmods:-/lib/modules/$kernel}
    local dst=$initdir/lib/modules/$kernel
    local record=$src/bootlink-applied.json
    local strict=${BOOTLINK_STRICT:-0}
    local f d p total=0 bad=0 unsigned=0
    local -A want=()

    if [[ ! -f $record ]]; then
        dwarn "bootlink: $src has no bootlink-applied.json: its modules were never taken through bootlink apply"
        [[ $strict == 1 ]] && return 1
        return 0
    fi

    # What dracut installs after the module loop, installed now (optional,
    # as dracut's own later call reports a missing one). instmods without
    # arguments would read the list from stdin: called only with some.
    local later="${drivers:-} ${add_drivers:-} ${force_drivers:-} ${filesystems:-}"
    if [[ -n ${later// /} ]]; then
        # shellcheck disable=SC2086
        hostonly='' instmods $later
    fi

    while read -r d p; do
        want[$p]=$d
    done < <(bootlink_record "$record")

    if [[ -d $dst ]]; then
        while IFS= read -r -d '' f; do
            p=${f#"$dst"/}
            d=$(sha256sum < "$f")
            d=${d%% *}
            total=$((total + 1))
            if [[ -z ${want[$p]:-} ]]; then
                dwarn "bootlink: $p: not in bootlink-applied.json (installed after bootlink apply, or never applied): installed as it is"
                bad=$((bad + 1))
            elif [[ ${want[$p]} != "$d" ]]; then
                dwarn "bootlink: $p: not the bytes bootlink apply wrote (sha256 $d, the record has ${want[$p]}): installed as it is"
                bad=$((bad + 1))
            elif [[ $f == *.ko && "$(tail -c 28 "$f" | tr -d '\000')" != '~Module signature appended~' ]]; then
                unsigned=$((unsigned + 1))
            fi
        done < <(find "$dst" \( -name '*.ko' -o -name '*.ko.*' \) -type f -print0)
    fi

    inst_simple "$record" "/lib/modules/$kernel/bootlink-applied.json"

    if ((unsigned > 0)) && [[ ${do_strip:-} == yes ]]; then
        # Read by dracut after the module loop.
        # shellcheck disable=SC2034
        do_strip=no
        dinfo "bootlink: $unsigned applied modules are unsigned (listed in the kernel's hash list): not stripping this initramfs (a stripped module no longer matches the list; do_strip=no in dracut.conf.d says so for good)"
    fi
    dinfo "bootlink: $((total - bad)) of $total modules as bootlink apply wrote them; record installed"
    if ((bad > 0)) && [[ $strict == 1 ]]; then
        dfatal "bootlink: $bad of $total modules in the initramfs are not as bootlink apply wrote them (BOOTLINK_STRICT=1)"
        return 1
    fi
    return 0
}

install() {
    return 0
}

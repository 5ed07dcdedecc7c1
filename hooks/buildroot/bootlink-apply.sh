#!/bin/sh
# Buildroot: `bootlink apply` on the kernel's build and every module in the
# target directory, run from TARGET_FINALIZE_HOOKS (external.mk) with the
# variables Buildroot gives it:
#
#   HOST_DIR          bootlink is $HOST_DIR/bin/bootlink (the host-bootlink
#                     package); depmod is $HOST_DIR/sbin/depmod (host-kmod)
#   LINUX_DIR         the kernel's source and object directory (vmlinux, .config,
#                     System.map, arch/x86/boot/bzImage, the module signing key)
#   TARGET_DIR        INSTALL_MOD_PATH of linux.mk's modules_install, and of
#                     every kernel-module package's
#   BINARIES_DIR      where Buildroot puts the kernel image (output/images)
#   LINUX_IMAGE_PATH  the image linux.mk installs ($(LINUX_DIR)/arch/x86/boot/bzImage)
#   BOOTLINK_INSTALL_TARGET  "y" when the image is also in $TARGET_DIR/boot
#                     (BR2_LINUX_KERNEL_INSTALL_TARGET)
#   BOOTLINK_APPLY_OPTS  more options for apply (split on spaces)
#
# When: target-finalize, after every package has installed its files, so
# modules installed by kernel-module packages after linux are applied (and,
# with a module hash list, listed in the image) too. Buildroot's own depmod
# (LINUX_RUN_DEPMOD) is a target-finalize hook that runs before this one:
# apply runs depmod again for the modules it rewrote, with Buildroot's
# host depmod first on PATH.
#
# The image: when the kernel keeps a module hash list, apply writes it into
# $LINUX_DIR/vmlinux and makes the bzImage again in place. linux's
# install-images step has copied the image to $BINARIES_DIR before
# target-finalize: it is copied there again (when it differs), and to
# $TARGET_DIR/boot when Buildroot installs it there.
#
# A module apply refuses is left as installed (it loads as it would have);
# the images are still copied, and the step then fails with apply's status,
# so the build stops and says so.
set -u
: "${HOST_DIR:?}" "${LINUX_DIR:?}" "${TARGET_DIR:?}" "${BINARIES_DIR:?}"
image=${LINUX_IMAGE_PATH:-$LINUX_DIR/arch/x86/boot/bzImage}

status=0
# shellcheck disable=SC2086
PATH="$HOST_DIR/sbin:$HOST_DIR/bin:$PATH" \
    "$HOST_DIR/bin/bootlink" apply --build "$LINUX_DIR" --modules "$TARGET_DIR" ${BOOTLINK_APPLY_OPTS:-} ||
    status=$?

# Copy $1 to the directory $2 when the copy there differs.
copy_if_changed() {
    to=$2/$(basename "$1")
    if ! cmp -s "$1" "$to"; then
        mkdir -p "$2" && cp "$1" "$to.bootlink-tmp" && mv "$to.bootlink-tmp" "$to" || return 1
        echo "bootlink: $to" >&2
    fi
}

if [ -f "$image" ]; then
    copy_if_changed "$image" "$BINARIES_DIR" || status=1
    if [ "${BOOTLINK_INSTALL_TARGET:-}" = y ]; then
        copy_if_changed "$image" "$TARGET_DIR/boot" || status=1
    fi
fi
# vmlinux, where a post-build script or the image name put it there.
if [ "$image" != "$LINUX_DIR/vmlinux" ] && [ -f "$BINARIES_DIR/vmlinux" ]; then
    copy_if_changed "$LINUX_DIR/vmlinux" "$BINARIES_DIR" || status=1
fi
exit "$status"

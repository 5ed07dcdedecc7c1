# bootlink_apply: the kernel's installed modules through `bootlink apply`,
# after do_install and before they are packaged or deployed.
#
# Inherit it in the kernel recipe, or in a bbappend of it:
#
#   # linux-yocto_%.bbappend
#   inherit bootlink_apply
#
# do_install has installed the modules (modules_install with DEPMOD=echo
# into ${D}${nonarch_base_libdir}/modules/${KERNEL_VERSION}) and copied
# vmlinux and the image types from ${B} into ${D}/${KERNEL_IMAGEDEST}.
# do_bootlink_apply runs apply on that module tree with the kernel's build
# directory ${B} (vmlinux, .config, System.map, the module signing key);
# when the kernel keeps a module hash list, apply writes it into
# ${B}/vmlinux and makes ${B}/${KERNEL_OUTPUT_DIR}/bzImage again in place,
# where do_deploy takes the image from, and the task installs both into
# ${D} again over do_install's copies. depmod is Yocto's (depmodwrapper,
# when the root filesystem is made): apply is given --no-depmod.
#
# BOOTLINK_APPLY_OPTS adds options, e.g. "--sign-key ... --sign-cert ...".

DEPENDS:append = " bootlink-native"

BOOTLINK_APPLY_OPTS ??= ""

# do_package strips kernel modules that carry no signature
# (oe.package.runstrip) and gives them a .gnu_debuglink (the debug split):
# a module listed in the kernel's hash list, or left unsigned, must reach
# the package as apply wrote it.
INHIBIT_PACKAGE_STRIP = "1"
INHIBIT_PACKAGE_DEBUG_SPLIT = "1"

do_bootlink_apply() {
    if [ "${INITRAMFS_IMAGE_BUNDLE}" = "1" ]; then
        bbwarn "bootlink: INITRAMFS_IMAGE_BUNDLE links vmlinux again after do_install: the module hash list apply writes is not in the bundled image"
    fi
    modules="${D}${nonarch_base_libdir}/modules/${KERNEL_VERSION}"
    if [ ! -d "$modules" ]; then
        bbnote "bootlink: no modules installed for ${KERNEL_VERSION}"
        return 0
    fi
    bootlink apply --build "${B}" --modules "$modules" --no-depmod ${BOOTLINK_APPLY_OPTS}
    # The image files do_install copied, as apply left them.
    for imageType in ${KERNEL_IMAGETYPES}; do
        if [ -f "${D}/${KERNEL_IMAGEDEST}/$imageType-${KERNEL_VERSION}" ]; then
            install -m 0644 "${B}/${KERNEL_OUTPUT_DIR}/$imageType" "${D}/${KERNEL_IMAGEDEST}/$imageType-${KERNEL_VERSION}"
        fi
    done
    if [ -f "${D}/${KERNEL_IMAGEDEST}/vmlinux-${KERNEL_VERSION}" ]; then
        install -m 0644 "${B}/vmlinux" "${D}/${KERNEL_IMAGEDEST}/vmlinux-${KERNEL_VERSION}"
    fi
}
do_bootlink_apply[doc] = "Takes the installed kernel modules through bootlink apply"
do_bootlink_apply[dirs] = "${B}"
addtask bootlink_apply after do_install before do_package do_populate_sysroot do_bundle_initramfs do_deploy

# bootlink has no public home page or bug tracker yet (.oelint.cfg).
SUMMARY = "Kernel modules rewritten at build time, for a faster boot"
DESCRIPTION = "bootlink resolves kernel modules' symbols, does the module \
               loader's work and writes a module hash list into the kernel \
               image at build time. A kernel recipe inherits bootlink_apply \
               to take its modules through it."
SECTION = "devel"
# The bootlink tree names no licence of its own.
LICENSE = "CLOSED"
CVE_PRODUCT = "bootlink"

# This layer lives in the bootlink source tree (hooks/yocto/meta-bootlink):
# the recipe clones that tree with git's file protocol. BOOTLINK_GIT_DIR
# and BOOTLINK_BRANCH name another clone or branch.
PV = "0.1.0+git"
BOOTLINK_GIT_DIR ??= "${FILE_DIRNAME}/../../../../.."
BOOTLINK_BRANCH ??= "main"
SRC_URI = "git://${BOOTLINK_GIT_DIR};protocol=file;branch=${BOOTLINK_BRANCH}"

# The tree's newest commit on that branch: the tool is built from the
# source it lives in. Set SRCREV to a commit for a reproducible build.
# nooelint: oelint.vars.autorev
SRCREV = "${AUTOREV}"

require ${BPN}-crates.inc

inherit cargo cargo-update-recipe-crates

# The binary with the product's commands only (apply, the steps, the
# builds): the lab's measuring commands are a default feature a target
# does not need.
CARGO_BUILD_FLAGS:append = " --no-default-features"

BBCLASSEXTEND = "native"

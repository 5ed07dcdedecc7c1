################################################################################
#
# bootlink
#
################################################################################

# The source is the bootlink tree this br2-external tree lives in
# (hooks/buildroot): Buildroot's "local" site method copies it into the
# build directory; the cargo infrastructure builds and installs it.
BOOTLINK_VERSION = 0.1.0
BOOTLINK_SITE = $(BR2_EXTERNAL_BOOTLINK_PATH)/../..
BOOTLINK_SITE_METHOD = local

# Cargo's own build directory in the source tree is not source.
HOST_BOOTLINK_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS = --exclude /target

# A local source is not downloaded, so the cargo download step that
# vendors the crates does not run for it: fetch the crates Cargo.lock
# names into Buildroot's cargo home (in the download directory) after
# the copy, so that the offline build finds them.
define HOST_BOOTLINK_FETCH_CRATES
	cd $(@D) && $(HOST_MAKE_ENV) $(PKG_COMMON_CARGO_ENV) \
		cargo fetch --locked --manifest-path Cargo.toml
endef
HOST_BOOTLINK_POST_RSYNC_HOOKS += HOST_BOOTLINK_FETCH_CRATES

# The binary with the product's commands only (apply, the steps, the
# builds): the lab's measuring commands are a default feature.
HOST_BOOTLINK_CARGO_BUILD_OPTS = --no-default-features

$(eval $(host-cargo-package))

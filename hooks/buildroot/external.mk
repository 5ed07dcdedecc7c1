include $(sort $(wildcard $(BR2_EXTERNAL_BOOTLINK_PATH)/package/*/*.mk))

# bootlink apply on the kernel's build and the modules it installed into
# the target directory (hooks/buildroot/bootlink-apply.sh says how).
#
# When: after linux's install to target, where linux.mk has installed the
# modules with DEPMOD=true; Buildroot runs depmod itself later, in
# target-finalize (LINUX_RUN_DEPMOD), so apply is told --no-depmod and
# depmod indexes the modules as apply left them. Modules installed by
# other packages after linux (kernel-module packages) are not applied.
ifeq ($(BR2_PACKAGE_HOST_BOOTLINK_APPLY),y)

# linux.mk was read before this file: its rules' prerequisites are
# already made, so the order is added here as well.
LINUX_DEPENDENCIES += host-bootlink
$(LINUX_TARGET_CONFIGURE): | host-bootlink

define HOST_BOOTLINK_APPLY_TO_LINUX
	HOST_DIR="$(HOST_DIR)" \
	LINUX_DIR="$(LINUX_DIR)" \
	TARGET_DIR="$(TARGET_DIR)" \
	BINARIES_DIR="$(BINARIES_DIR)" \
	LINUX_IMAGE_PATH="$(LINUX_IMAGE_PATH)" \
	BOOTLINK_INSTALL_TARGET="$(BR2_LINUX_KERNEL_INSTALL_TARGET)" \
	BOOTLINK_APPLY_OPTS="$(call qstrip,$(BR2_PACKAGE_HOST_BOOTLINK_APPLY_OPTS))" \
		$(BR2_EXTERNAL_BOOTLINK_PATH)/bootlink-apply.sh
endef
LINUX_POST_INSTALL_TARGET_HOOKS += HOST_BOOTLINK_APPLY_TO_LINUX

endif

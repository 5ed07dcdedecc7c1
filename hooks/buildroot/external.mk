include $(sort $(wildcard $(BR2_EXTERNAL_BOOTLINK_PATH)/package/*/*.mk))

# bootlink apply on the kernel's build and every module in the target
# directory (hooks/buildroot/bootlink-apply.sh says how).
#
# When: in target-finalize, after every package's install to target, so
# the modules of kernel-module packages (installed after linux's own) are
# applied and listed too. linux.mk's LINUX_RUN_DEPMOD is a target-finalize
# hook as well, added before this one (linux.mk is read before the
# br2-external trees): apply runs depmod again itself (Buildroot's
# $(HOST_DIR)/sbin/depmod), after it has rewritten the modules.
ifeq ($(BR2_PACKAGE_HOST_BOOTLINK_APPLY),y)

# host-bootlink is built with linux (linux.mk was read before this file:
# its rules' prerequisites are already made, so the order is added here
# as well); target-finalize runs after both.
LINUX_DEPENDENCIES += host-bootlink
$(LINUX_TARGET_CONFIGURE): | host-bootlink

define HOST_BOOTLINK_APPLY_TO_TARGET
	HOST_DIR="$(HOST_DIR)" \
	LINUX_DIR="$(LINUX_DIR)" \
	TARGET_DIR="$(TARGET_DIR)" \
	BINARIES_DIR="$(BINARIES_DIR)" \
	LINUX_IMAGE_PATH="$(LINUX_IMAGE_PATH)" \
	BOOTLINK_INSTALL_TARGET="$(BR2_LINUX_KERNEL_INSTALL_TARGET)" \
	BOOTLINK_APPLY_OPTS="$(call qstrip,$(BR2_PACKAGE_HOST_BOOTLINK_APPLY_OPTS))" \
		$(BR2_EXTERNAL_BOOTLINK_PATH)/bootlink-apply.sh
endef
TARGET_FINALIZE_HOOKS += HOST_BOOTLINK_APPLY_TO_TARGET

endif

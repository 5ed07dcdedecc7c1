// SPDX-License-Identifier: GPL-2.0
/*
 * bl_fail: a module whose init fails (-ENODEV), as drivers for absent
 * hardware do (coretemp, rapl in a VM), for the loaders' failure tests:
 * its dependents must not be loaded, and every request for it costs a load.
 */
#include <linux/module.h>

int bl_fail_marker;
EXPORT_SYMBOL_GPL(bl_fail_marker);

static int __init bl_fail_init(void)
{
	pr_info("bl_fail: init fails on purpose\n");
	return -ENODEV;
}
module_init(bl_fail_init);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bootlink test: init fails");

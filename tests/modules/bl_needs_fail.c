// SPDX-License-Identifier: GPL-2.0
/*
 * bl_needs_fail: depends on bl_fail (uses its symbol), so a loader must
 * never load it once bl_fail failed: the failure propagates.
 */
#include <linux/module.h>

extern int bl_fail_marker;

static int __init bl_needs_fail_init(void)
{
	return bl_fail_marker;
}
module_init(bl_needs_fail_init);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bootlink test: depends on a module whose init fails");

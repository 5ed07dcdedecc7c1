// SPDX-License-Identifier: GPL-2.0
/*
 * bl_fail: a module whose init fails (-ENODEV), as drivers for absent
 * hardware do (coretemp, rapl in a VM), for the loaders' failure tests:
 * its dependents must not be loaded, and every request for it costs a load.
 * With ms=N its init sleeps N milliseconds before failing, so that duplicate
 * requests arrive while it runs: each must get its error.
 */
#include <linux/module.h>
#include <linux/delay.h>

static unsigned int ms;
module_param(ms, uint, 0444);
MODULE_PARM_DESC(ms, "how long init takes before it fails, in milliseconds");

int bl_fail_marker;
EXPORT_SYMBOL_GPL(bl_fail_marker);

static int __init bl_fail_init(void)
{
	if (ms)
		msleep(ms);
	pr_info("bl_fail: init fails on purpose\n");
	return -ENODEV;
}
module_init(bl_fail_init);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bootlink test: init fails");

// SPDX-License-Identifier: GPL-2.0
/*
 * bl_slow: a module whose init takes `ms` milliseconds (default 3000), for
 * the batch loader's tests: a worker killed mid-load, a timeout, and
 * duplicate requests arriving while its init runs.
 */
#include <linux/module.h>
#include <linux/delay.h>

static unsigned int ms = 3000;
module_param(ms, uint, 0444);
MODULE_PARM_DESC(ms, "how long init takes, in milliseconds");

static int __init bl_slow_init(void)
{
	pr_info("bl_slow: init takes %u ms\n", ms);
	msleep(ms);
	pr_info("bl_slow: init done\n");
	return 0;
}
module_init(bl_slow_init);

static void __exit bl_slow_exit(void)
{
}
module_exit(bl_slow_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bootlink test: slow init");

// SPDX-License-Identifier: GPL-2.0
/*
 * bl_oops: a module whose init oopses (BUG()), for `bootlink survey`'s
 * boot test: under the lab's oops=panic the guest dies while it loads, and
 * the survey must name it and go on with the next module in a new boot.
 */
#include <linux/module.h>
#include <linux/bug.h>

static int __init bl_oops_init(void)
{
	pr_info("bl_oops: init oopses on purpose\n");
	BUG();
	return 0;
}
module_init(bl_oops_init);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bootlink test: init oopses");

// SPDX-License-Identifier: GPL-2.0
/*
 * bl_weak: a module of two objects where a __weak function of this one is
 * replaced by a definition in bl_weak_impl.c. The weak function's code
 * stays in .text without a symbol, and its __mcount_loc record with it:
 * the record 6.1 disables at load (listed as __ftrace_invalid_address___N)
 * and `bootlink finalize` drops at build time.
 */
#include <linux/module.h>
#include <linux/kernel.h>

#include "bl_weak.h"

static noinline int bl_weak_before(int x)
{
	pr_info("bl_weak: before %d\n", x);
	return x + 1;
}

void __weak bl_weak_hook(void)
{
	pr_info("bl_weak: the default hook (never runs)\n");
}

static int __init bl_weak_init(void)
{
	bl_weak_hook();
	return bl_weak_before(-1);
}
module_init(bl_weak_init);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bootlink test module: an overridden weak function");

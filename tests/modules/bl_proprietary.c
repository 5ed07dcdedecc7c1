// SPDX-License-Identifier: GPL-2.0
/*
 * bl_proprietary: declares a GPL-incompatible license but imports the
 * GPL-only export ktime_get (the same one bl_plain uses) next to the
 * ordinary export _printk.  The kernel's loader refuses to bind ktime_get
 * for this module, so a preresolver must leave it undefined too.
 *
 * (The file itself is GPL-2.0 like the rest of the test suite; only the
 * MODULE_LICENSE tag below is deliberately "Proprietary".)
 */
#include <linux/module.h>
#include <linux/init.h>
#include <linux/timekeeping.h>

static ktime_t bl_prop_loaded_at;

static int __init bl_proprietary_init(void)
{
	bl_prop_loaded_at = ktime_get();	/* EXPORT_SYMBOL_GPL */
	pr_info("bl_proprietary: loaded at %lld ns\n",
		ktime_to_ns(bl_prop_loaded_at));
	return 0;
}

static void __exit bl_proprietary_exit(void)
{
	pr_info("bl_proprietary: unloaded\n");
}

module_init(bl_proprietary_init);
module_exit(bl_proprietary_exit);

MODULE_LICENSE("Proprietary");
MODULE_DESCRIPTION("bootlink test module: non-GPL module using a GPL-only export");

// SPDX-License-Identifier: GPL-2.0
/*
 * bl_plain: GPL module for the bootlink preresolver tests.
 *
 * Imports ordinary vmlinux exports (_printk, kmalloc_trace, kfree, kstrdup,
 * strlen) and one GPL-only vmlinux export (ktime_get).  Exports
 * bl_plain_hello so that bl_user has a symbol that only a module provides.
 */
#include <linux/module.h>
#include <linux/init.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/timekeeping.h>

#include "bl_plain.h"

struct bl_plain_state {
	char *greeting;
	ktime_t loaded_at;
};

static struct bl_plain_state *bl_state;

/* Exported to other modules: returns the length of the stored greeting. */
size_t bl_plain_hello(const char *who)
{
	const char *g = bl_state ? bl_state->greeting : "hello";

	pr_info("bl_plain: %s, %s\n", g, who);
	return strlen(g);
}
EXPORT_SYMBOL(bl_plain_hello);

static int __init bl_plain_init(void)
{
	bl_state = kmalloc(sizeof(*bl_state), GFP_KERNEL);
	if (!bl_state)
		return -ENOMEM;

	bl_state->greeting = kstrdup("hello from bl_plain", GFP_KERNEL);
	if (!bl_state->greeting) {
		kfree(bl_state);
		bl_state = NULL;
		return -ENOMEM;
	}
	bl_state->loaded_at = ktime_get();	/* EXPORT_SYMBOL_GPL */
	pr_info("bl_plain: loaded, greeting is %zu bytes\n",
		bl_plain_hello("init"));
	return 0;
}

static void __exit bl_plain_exit(void)
{
	pr_info("bl_plain: unloading after %lld ns\n",
		ktime_to_ns(ktime_sub(ktime_get(), bl_state->loaded_at)));
	kfree(bl_state->greeting);
	kfree(bl_state);
}

module_init(bl_plain_init);
module_exit(bl_plain_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bootlink test module: ordinary + GPL-only imports, exports bl_plain_hello");

// SPDX-License-Identifier: GPL-2.0
/*
 * bl_user: GPL module that depends on bl_plain.
 *
 * bl_plain_hello is exported only by the module bl_plain, never by vmlinux,
 * so a vmlinux-only preresolver has nothing to bind it to.
 */
#include <linux/module.h>
#include <linux/init.h>
#include <linux/slab.h>

#include "bl_plain.h"	/* bl_plain_hello, provided by bl_plain.ko */

static char *bl_user_name;

static int __init bl_user_init(void)
{
	bl_user_name = kstrdup("bl_user", GFP_KERNEL);
	if (!bl_user_name)
		return -ENOMEM;
	pr_info("bl_user: bl_plain_hello returned %zu\n",
		bl_plain_hello(bl_user_name));
	return 0;
}

static void __exit bl_user_exit(void)
{
	kfree(bl_user_name);
	pr_info("bl_user: unloaded\n");
}

module_init(bl_user_init);
module_exit(bl_user_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bootlink test module: imports a module-only export (bl_plain_hello)");

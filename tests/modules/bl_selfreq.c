// SPDX-License-Identifier: GPL-2.0
/*
 * bl_selfreq: a module whose init asks for its own alias with
 * request_module(), as crypto algorithms can through "crypto-NAME"
 * aliases. With a modprobe that does not check /sys/module first (busybox
 * insmod of the same file), the nested request arrives while this init
 * runs: the loader must answer it at once (-EEXIST), not wait for the init
 * that is waiting for it.
 */
#include <linux/module.h>
#include <linux/kmod.h>

static int __init bl_selfreq_init(void)
{
	int ret = request_module("bl-selfreq-alias");

	pr_info("bl_selfreq: request_module(own alias) returned %d\n", ret);
	return 0;
}
module_init(bl_selfreq_init);

static void __exit bl_selfreq_exit(void)
{
}
module_exit(bl_selfreq_exit);

MODULE_ALIAS("bl-selfreq-alias");
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bootlink test: init requests its own alias");

// SPDX-License-Identifier: GPL-2.0
/*
 * bl_ns_missing: uses dma_buf_put, which vmlinux exports in namespace DMA_BUF
 * (EXPORT_SYMBOL_NS_GPL), WITHOUT MODULE_IMPORT_NS(DMA_BUF).  The loader
 * refuses such a module, so a preresolver must leave dma_buf_put undefined.
 * bl_ns_import.c is the control; the two files differ only in the import.
 */
#include <linux/module.h>
#include <linux/init.h>
#include <linux/compiler.h>
#include <linux/dma-buf.h>

static int __init bl_ns_init(void)
{
	struct dma_buf *buf = NULL;

	/*
	 * Hide the NULL from the optimiser so the call (and its relocation
	 * against dma_buf_put) survives, while never actually running.
	 */
	OPTIMIZER_HIDE_VAR(buf);
	if (buf)
		dma_buf_put(buf);
	pr_info("%s: loaded\n", KBUILD_MODNAME);
	return 0;
}

static void __exit bl_ns_exit(void)
{
	pr_info("%s: unloaded\n", KBUILD_MODNAME);
}

module_init(bl_ns_init);
module_exit(bl_ns_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bootlink test module: namespaced export used without MODULE_IMPORT_NS");

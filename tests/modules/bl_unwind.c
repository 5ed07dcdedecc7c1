// SPDX-License-Identifier: GPL-2.0
/*
 * bl_unwind: stack traces from nested static functions of a module, for the
 * ORC tests of `bootlink finalize`. Its init (init text) calls a chain of
 * noinline static functions in core text whose innermost dumps its stack
 * and WARNs: every frame is unwound with the module's ORC table, so the
 * traces are the same whether the loader sorted the table or the build did.
 */
#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/bug.h>

static noinline void bl_unwind_leaf(int depth)
{
	pr_info("bl_unwind: leaf at depth %d\n", depth);
	dump_stack();
	WARN(1, "bl_unwind: expected warning at depth %d\n", depth);
}

static noinline void bl_unwind_middle(int depth)
{
	bl_unwind_leaf(depth + 1);
	barrier();		/* no tail call: keep this frame */
}

static noinline void bl_unwind_outer(int depth)
{
	bl_unwind_middle(depth + 1);
	barrier();
}

static noinline void __init bl_unwind_init_helper(void)
{
	bl_unwind_outer(1);
	barrier();
}

static int __init bl_unwind_init(void)
{
	bl_unwind_init_helper();
	return 0;
}
module_init(bl_unwind_init);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bootlink test module: stack traces from nested static functions");

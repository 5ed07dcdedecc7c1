// SPDX-License-Identifier: GPL-2.0
/* bl_weak's strong definition of bl_weak_hook (see bl_weak_main.c). */
#include <linux/kernel.h>

#include "bl_weak.h"

void bl_weak_hook(void)
{
	pr_info("bl_weak: the strong hook\n");
}

/* A position-independent executable with packed relative relocations
   (DT_RELR), bindings to a DT_RELR library and to libc, a pointer to a
   libc function in its data, and a copy relocation (ddr_counter). Its
   output is the same however it is loaded. */
#include <stdio.h>
#include <stdlib.h>

extern int ddr_counter;
const char *ddr_word(int i);
int ddr_apply(int op, int x);

static const char *const names[] = { "one", "two", "three", "four", "five", "six", "seven", "eight", "nine" };
static const char *const *const name_at[] = { &names[0], &names[4], &names[8] };
static int (*const print)(const char *) = puts;

int main(void)
{
    for (int i = 0; i < 9; i++)
        printf("%s %s %d\n", names[i], ddr_word(i), ddr_apply(i, i));
    for (int i = 0; i < 3; i++)
        print(*name_at[i]);
    ddr_counter++;
    printf("counter %d\n", ddr_counter);
    return 0;
}

/*
 * Names that several loaded objects define. The program's own step() has the name of the C
 * library's compatibility symbol step@GLIBC_2.2.5 (regexp.h's, gone from the API): a probe
 * on "step" means the program's, the one a call of step binds to. clash_value() is defined
 * by libclash_a.so and by libclash_b.so, both linked in: a probe on "clash_value" is
 * ambiguous, and refused naming both.
 */
#include <stdio.h>

int clash_value(int x);

__attribute__((noinline)) int step(int i)
{
    int r = i * 2 + 1;
    return r;
}

int main(void)
{
    int sum = 0;
    for (int i = 0; i < 5; i++)
        sum += step(i);
    printf("sum %d %d\n", sum, clash_value(1));
    return 0;
}

/* Shared by the USDT test program's two files (sdt_prog.c, sdt_sem.c). */
#pragma once

struct dpt_item {
    long id;
    int small;
    short tiny;
    signed char c;
};

extern unsigned short dpt_work_semaphore, dpt_global_semaphore;

long work(struct dpt_item *it, int k);
void globals(int k);

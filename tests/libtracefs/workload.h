/* The traced functions of the libtracefs client test (workload.c). */
#ifndef DPROBE_LT_WORKLOAD_H
#define DPROBE_LT_WORKLOAD_H
#ifdef __cplusplus
extern "C" {
#endif
int lt_leaf(int a, long b);
int lt_work(int a, long b);
int lt_run(int n);
#ifdef __cplusplus
}
#endif
#endif

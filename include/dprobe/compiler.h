/* SPDX-License-Identifier: MIT */
/* Small portability macros shared by the public headers. */
#ifndef DPROBE_COMPILER_H
#define DPROBE_COMPILER_H

#ifdef __cplusplus
#define DPROBE_EXTERN_C_BEGIN extern "C" {
#define DPROBE_EXTERN_C_END }
#else
#define DPROBE_EXTERN_C_BEGIN
#define DPROBE_EXTERN_C_END
#endif

#define DPROBE_API __attribute__((visibility("default")))

#endif

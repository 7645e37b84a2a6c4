/* Stack frame the fentry and return trampolines build (shared by the .S and C++).
 * The frame starts with a struct ftrace_regs, so its address is handed to C++ as is. */
#ifndef DPROBE_ARCH_FTRACE_FRAME_H
#define DPROBE_ARCH_FTRACE_FRAME_H

/* struct pt_regs offsets */
#define PTR_R15 0
#define PTR_R14 8
#define PTR_R13 16
#define PTR_R12 24
#define PTR_BP 32
#define PTR_BX 40
#define PTR_R11 48
#define PTR_R10 56
#define PTR_R9 64
#define PTR_R8 72
#define PTR_AX 80
#define PTR_CX 88
#define PTR_DX 96
#define PTR_SI 104
#define PTR_DI 112
#define PTR_ORIG_AX 120
#define PTR_IP 128
#define PTR_CS 136
#define PTR_FLAGS 144
#define PTR_SP 152
#define PTR_SS 160
/* struct ftrace_regs tail */
#define FREGS_VEC 168
#define FREGS_VEC_SIZE 176
/* trampoline-private */
#define FR_X87_COUNT 192 /* return trampoline: x87 registers saved (0-2) */
#define FR_KEEP_ALL 196  /* return trampoline: xmm2-15 saved (0/1) */
#define FR_X87 208       /* two 16-byte slots for st0/st1 (fstpt writes 10 bytes) */
#define FR_VEC 240       /* vector save area */

/* Entry frame: 8 vector registers, NX more xmm registers (jump sites) and the r11 parking
 * slot at the top (FRAME-8). */
#define ENTRY_FRAME(vsize, nx) (FR_VEC + 8 * (vsize) + (nx) * 16 + 16)
/* Return frame: 2 vector registers and xmm2-15; the slot above it holds the real return
 * address. */
#define RET_FRAME(vsize) (FR_VEC + 2 * (vsize) + 14 * 16)

/* For debuggers: records (and words per record) of dprobe_return_tramp_layout and
 * dprobe_entry_tramp_layout (ftrace_tramp.S). */
#define RETURN_LAYOUT_WORDS 11
#define RETURN_LAYOUT_COUNT 3
#define ENTRY_LAYOUT_WORDS 10
#define ENTRY_LAYOUT_COUNT 6

#endif

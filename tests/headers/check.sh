#!/bin/sh
# Compiles both_orders.c with CC in both orders of inclusion: dprobe's headers first must
# compile (C and C++); the system's first must fail with dprobe's message.
cc="$1"; cxx="$2"; inc="$3"; src="$(dirname "$0")/both_orders.c"
set -e
"$cc" -std=gnu11 -Wall -Werror -fsyntax-only -I"$inc" "$src"
"$cxx" -x c++ -std=gnu++20 -Wall -Werror -fsyntax-only -I"$inc" "$src"
if out=$("$cc" -fsyntax-only -I"$inc" -DHEADERS_SYSTEM_FIRST "$src" 2>&1); then
    echo "the system's <linux/ptrace.h> first compiled: no clear message" >&2
    exit 1
fi
echo "$out" | grep -q "include the dprobe headers first" || { echo "$out" >&2; exit 1; }
echo "ok: dprobe first compiles (C, C++); system first fails with dprobe's message"

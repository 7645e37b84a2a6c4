#!/usr/bin/env python3
"""Only arch/ writes instruction bytes (Documentation/optprobes.md, "Arch verbs").

Generic layers (core, fprobe, kprobe, tracefs, tools, the public headers) ask arch/x86_64 to
prepare, arm and disarm detours, slots and sites; they never spell an opcode. This test
fails when a file there uses what writes instruction bytes:
  - the opcode constants of arch/x86_64/insn_bytes.h (INT3_INSN_OPCODE, ...);
  - the byte-producing helpers (make_jmp_rel32, fill_nops, the relocator, the site byte
    writers behind ftrace_make_call/nop);
  - opcode literals (0xcc, 0xe8, 0xe9, 0xeb, 0xc3, 0x90, ff 15 / ff 25).
Reading code is not writing it: predicates (is_endbr64, is_nop), sizes and the decoder are
fine. So that the test can fail at all, the same patterns must find arch/x86_64's own
byte writers.

  only_arch_writes_code.py SOURCE_DIR
"""
import os
import re
import sys

ROOT = sys.argv[1]
GENERIC = ["core", "fprobe", "kprobe", "tracefs", "tools", "include"]
ARCH = "arch/x86_64"
EXTS = (".c", ".cc", ".cpp", ".h", ".hpp", ".S", ".inc")

PATTERNS = [
    (re.compile(r"\b[A-Z0-9]+_INSN_OPCODE\b"), "opcode constant"),
    (re.compile(r"\bmake_(?:jmp|call)_rel32\b"), "rel32 branch encoder"),
    (re.compile(r"\b(?:fill_nops|nop_bytes)\b"), "NOP encoder"),
    (re.compile(r"\brelocate_(?:one|insns)\b"), "instruction relocator"),
    (re.compile(r"\bsite_(?:jmp|nop)_bytes\b"), "site byte writer"),
    (re.compile(r"\b0x(?:cc|e8|e9|eb|c3|90)\b", re.I), "opcode literal"),
    (re.compile(r"0xff\s*,\s*0x(?:15|25)\b", re.I), "indirect call/jmp literal"),
    (re.compile(r"\\x(?:cc|e8|e9|90)", re.I), "opcode in a string literal"),
]


def strip_comments(text):
    # Comments may talk about opcodes; code may not write them.
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def scan(top):
    hits = []
    for d, _, files in os.walk(os.path.join(ROOT, top)):
        for f in sorted(files):
            if not f.endswith(EXTS):
                continue
            path = os.path.join(d, f)
            with open(path, errors="replace") as fh:
                text = strip_comments(fh.read())
            for n, line in enumerate(text.split("\n"), 1):
                for rx, what in PATTERNS:
                    m = rx.search(line)
                    if m:
                        hits.append((os.path.relpath(path, ROOT), n, what, m.group(0)))
    return hits


def main():
    bad = []
    for top in GENERIC:
        bad += scan(top)
    for path, n, what, text in bad:
        print(f"{path}:{n}: {what} '{text}' outside arch/")
    if bad:
        print("generic code asks arch verbs for instruction bytes: arch/x86_64/detour.h, "
              "kprobes_arch.h, ftrace_make.h, text_patching.h (Documentation/optprobes.md)")
    # The patterns must see arch's own writers, or this test could never fail.
    arch_hits = {what for _, _, what, _ in scan(ARCH)}
    for want in ("opcode constant", "rel32 branch encoder", "instruction relocator",
                 "opcode literal"):
        if want not in arch_hits:
            print(f"pattern for {want} finds nothing in {ARCH}: the test has gone blind")
            bad.append(want)
    if bad:
        sys.exit(1)
    print(f"ok: no instruction bytes written outside {ARCH} "
          f"({', '.join(GENERIC)} scanned; arch matches: {len(arch_hits)} kinds)")


main()

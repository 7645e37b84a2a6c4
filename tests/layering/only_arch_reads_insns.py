#!/usr/bin/env python3
"""Only arch/ knows what an instruction does (Documentation/design.md, "arch/x86_64").

The kernel's generic kprobes.c never looks inside an instruction: its arch's
arch_prepare_kprobe(), can_probe() and kprobe_int3_handler() do. Here too, generic layers
(core, fprobe, kprobe, tracefs, tools, the public headers) may hold a decoded instruction
(arch::insn) and ask where it is, how long it is and where the next one starts, and they call
the arch verbs that decide about it (arch::prepare_kprobe, arch::kprobe_emulate_insn, ...).
This test fails when a file there
  - names an instruction kind: `insn::` followed by an enumerator or an enum of struct insn
    (`arch::insn::call_indirect`, `using enum arch::insn::kind`);
  - reads what the decoder found: a member of struct insn other than addr, len, next(),
    bytes and mnemonic_name() (`.ind_reg`, `->rip_target`, `.is_relative_branch()`);
  - calls one of the decoder's judgements: a function arch/x86_64/insn.h declares other than
    insn_decode, insn_to_string and insn_boundary (`insn_can_emulate`, `insn_ool_refusal`).
The names come from arch/x86_64/insn.h itself, so a kind, field or judgement added there is
covered at once. Members whose names are common words (k, cc, loop) are left out of the
member rule: a test of the kind needs an enumerator to compare with, which the kind rule
catches. Comments and string literals are removed first. So that the test can fail at all,
the same scan must find each rule's names in arch/x86_64's own code; tests/layering/fixtures
plants each kind of violation in a copy of the tree and checks that this script fails on it.

  only_arch_reads_insns.py SOURCE_DIR
"""
import os
import re
import sys

GENERIC = ["core", "fprobe", "kprobe", "tracefs", "tools", "include"]
ARCH = "arch/x86_64"
HEADER = os.path.join(ARCH, "insn.h")
EXTS = (".c", ".cc", ".cpp", ".h", ".hpp", ".inc")

ALLOWED_MEMBERS = {"addr", "len", "next", "bytes", "mnemonic_name"}
COMMON_WORDS = {"k", "cc", "loop"}
ALLOWED_FUNCS = {"insn_decode", "insn_to_string", "insn_boundary"}

STRIP = re.compile(r"""//[^\n]*|/\*.*?\*/|(?:\bu8|\bu|\bU|\bL)?"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])+'""",
                   re.S)


def strip(text):
    """Comments and literals blanked, line breaks kept (so line numbers stay)."""
    return STRIP.sub(lambda m: "\n" * m.group(0).count("\n") + " ", text)


def struct_body(text):
    m = re.search(r"\bstruct\s+insn\s*\{", text)
    if not m:
        sys.exit(f"{HEADER}: no struct insn")
    depth, i = 1, m.end()
    while depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[m.end():i - 1], text[:m.start()] + text[i:]


def parse_header(root):
    """(enum names and enumerators, member names, judgement functions) of insn.h."""
    text = strip(open(os.path.join(root, HEADER)).read())
    body, rest = struct_body(text)
    kinds, members = set(), set()
    for m in re.finditer(r"\benum\s+(\w+)[^{;]*\{([^}]*)\}\s*(\w+)?", body):
        kinds.add(m.group(1))
        kinds.update(re.findall(r"(\w+)\s*(?:=[^,]*)?(?:,|$)", m.group(2).strip()))
        if m.group(3):
            members.add(m.group(3))
    flat = re.sub(r"\benum\s+\w+[^{;]*\{[^}]*\}", "enum", body)
    flat = re.sub(r"\{[^{}]*\}", ";", flat)  # method bodies
    for stmt in flat.split(";"):
        stmt = " ".join(stmt.split())
        if not stmt or stmt.startswith("enum"):
            continue
        call = re.search(r"(\w+)\s*\(", stmt)
        if call:
            members.add(call.group(1))
            continue
        for decl in re.split(r",(?![^\[]*\])", re.sub(r"=[^,]*", "", stmt)):
            name = re.findall(r"(\w+)\s*(?:\[[^\]]*\])?\s*$", decl.strip())
            if name:
                members.add(name[0])
    funcs = set(re.findall(r"^(?:[\w:<>]+[\s*&]+)+(\w+)\s*\(", rest, re.M))
    kinds.discard("")
    return (kinds, members - ALLOWED_MEMBERS - COMMON_WORDS, funcs - ALLOWED_FUNCS)


def rules(root):
    kinds, members, funcs = parse_header(root)
    return [
        (re.compile(r"\binsn\s*::\s*(%s)\b" % "|".join(sorted(kinds))), "instruction kind"),
        (re.compile(r"(?:\.|->)\s*(%s)\b" % "|".join(sorted(members))), "instruction field"),
        (re.compile(r"\b(%s)\s*\(" % "|".join(sorted(funcs))), "instruction judgement"),
    ]


def scan(root, tops, checks):
    for top in tops:
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith(EXTS):
                    continue
                path = os.path.join(d, f)
                text = strip(open(path, errors="replace").read())
                for n, line in enumerate(text.split("\n"), 1):
                    for rx, what in checks:
                        for m in rx.finditer(line):
                            yield os.path.relpath(path, root), n, what, m.group(1)


def main():
    root = sys.argv[1]
    checks = rules(root)
    bad = list(scan(root, GENERIC, checks))
    for path, n, what, name in bad:
        print(f"{path}:{n}: {what} '{name}' outside arch/")
    if bad:
        print("generic code asks arch verbs about instructions: arch/x86_64/kprobes_arch.h "
              "(prepare_kprobe), kprobes_int3.h (kprobe_emulate_insn, ...)")
    seen = {what for _, _, what, _ in scan(root, [ARCH], checks)}
    blind = [what for _, what in checks if what not in seen]
    for what in blind:
        print(f"the scan finds no {what} in {ARCH}: the test has gone blind")
    if bad or blind:
        sys.exit(1)
    print(f"ok: no instruction looked into outside {ARCH}")


if __name__ == "__main__":
    main()

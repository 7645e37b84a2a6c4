#!/usr/bin/env python3
"""core and arch know nothing of the probe layers built on them (Documentation/design.md,
"Lower layers never know the upper ones"): no name of fprobe's types, flags, fields' layout
or functions appears in their code. As the kernel's fprobe picks its own ftrace_ops
callbacks and ftrace never reads an fprobe flag, fprobe fills in core's records (an
ftrace_ops and its ftrace_direct: handlers, their first argument, an on/off word) and the
trampolines read only those. Including <dprobe/fprobe.h> is includes_go_down.py's to catch;
this catches the names themselves, whether they come from that header, from a declaration of
the file's own (`struct fprobe;`), or as offsets and symbols written out in assembly.

Comments and string literals are not code: they may speak of fprobe (a comment saying who
fills a record in, a list of dprobe's own functions never to hook).

  lower_layers_blind.py SOURCE_DIR
"""
import os
import re
import sys

BLIND = ("arch", "core")
EXTS = (".cpp", ".cc", ".h", ".hpp", ".c", ".S", ".inc")
# What names the fprobe layer: its public types and callbacks, its flags, its functions, its
# internal records, and the offsets of its fields once spelled as assembler constants.
NAMES = re.compile(r"""
    \bstruct\s+fprobe\b | ::fprobe\b | \bfprobe\s*\* | \bfprobe_hlist\b
  | \bfprobe_(?:entry|exit|unwound)_cb\b | \bFPROBE_FL_\w+
  | \bFP_(?:FLAGS|NMISSED|ENTRY_DATA_SIZE|ENTRY_HANDLER|EXIT_HANDLER|UNWOUND_HANDLER|HLIST\w*|FL_\w+)\b
  | \b(?:un)?register_fprobe\w* | \b(?:enable|disable)_fprobe\b | \bfprobe_(?:disabled|shared_with_kprobes)\b
  | \bfprobe_ops_\w+ | \bfprobe_kprobe_busy\w*
""", re.X)
# Comments and literals, blanked (their newlines kept, so line numbers stay right).
STRIP = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def blank(m):
    return re.sub(r"[^\n]", " ", m.group(0))


def violations(root):
    for layer in BLIND:
        for dirpath, _, files in os.walk(os.path.join(root, layer)):
            for name in sorted(files):
                if not name.endswith(EXTS):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, errors="replace") as f:
                    text = f.read()
                code = STRIP.sub(blank, text)
                lines = text.split("\n")
                for n, line in enumerate(code.split("\n"), 1):
                    for m in NAMES.finditer(line):
                        yield "%s:%d: %s names fprobe's %s (%s)" % (
                            os.path.relpath(path, root), n, layer, m.group(0).strip(),
                            lines[n - 1].strip())


def main():
    root = sys.argv[1]
    bad = list(violations(root))
    for b in bad:
        print(b)
    if bad:
        sys.exit("%d name(s) of the fprobe layer in core or arch" % len(bad))
    print("core and arch name nothing of fprobe")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The dprobe command links the offline library, not the in-process runtime
(Documentation/design.md, "Layers"): a command that carried the runtime would run its
constructors and route its own sigaction, posix_spawn and exception calls through the
runtime's interposers. Checks the command's symbol table:

  - none of the runtime's interposers (sigaction, signal, posix_spawn, __cxa_begin_catch,
    _Unwind_RaiseException, backtrace, ...), trampolines and dispatcher
    (dprobe_ftrace_caller_*, dprobe_fgraph_entry, ...), registration functions
    (register_fprobe, register_kprobe) or file tree (tracefs_tree) is defined in it;
  - none of the functions the runtime's sources mark __attribute__((constructor)) is in it;
  - no strong global symbol that only the runtime defines (the runtime archive's, minus the
    offline archive's) is in it.

  cli_is_offline.py NM CLI RUNTIME_ARCHIVE OFFLINE_ARCHIVE SOURCE_ROOT
"""
import os
import re
import subprocess
import sys

# Named for a readable failure; each must be a runtime-only symbol (checked), so a rename
# cannot make this list silently check nothing.
INTERPOSERS = ["sigaction", "signal", "posix_spawn", "posix_spawnp", "setcontext",
               "swapcontext", "__cxa_begin_catch", "_Unwind_RaiseException",
               "_Unwind_ForcedUnwind", "_Unwind_Backtrace", "backtrace", "__fentry__"]
RUNTIME_ENTRIES = ["dprobe_fgraph_entry", "dprobe_ftrace_return", "dprobe_ftrace_caller_16",
                   "dprobe_ftrace_caller_all_16", "dprobe_return_to_handler_16",
                   "dprobe_fgraph_return_16", "register_kprobe", "copy_from_user_nofault"]
# Demangled name fragments (C++ functions and classes of the runtime).
RUNTIME_CXX = ["register_fprobe(", "tracefs_tree::", "ftrace_ops_attach(", "text_poke_batch("]
# Sources that run in a traced process: their constructors must not be in the command.
RUNTIME_DIRS = ["arch", "core", "fprobe", "kprobe", "tracefs", os.path.join("tools", "agent")]
CTOR = re.compile(r"__attribute__\(\(constructor(?:\(\d+\))?\)\)\s*(?:static\s+)?[\w:\s*]*?\b(\w+)\s*\(")


def nm(tool, path, *flags):
    out = subprocess.run([tool, *flags, path], check=True, capture_output=True, text=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and len(parts[1]) == 1:
            syms.append((parts[1], parts[2]))
    return syms


def strong_globals(tool, path, weak=()):
    # T/D/B/R: defined, global, not weak; weak ones are inline and template code any object
    # may carry a copy of. Those of WEAK count even when weak (the runtime's __cxa_begin_catch
    # is, so that the preload's linked-in C++ runtime can take its place: core/unwind.cpp).
    return {n for t, n in nm(tool, path, "--defined-only") if t in "TDBR" or
            (t in "WV" and n in weak)}


def constructors(root):
    names = set()
    for d in RUNTIME_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for f in files:
                if not f.endswith((".cpp", ".c")):
                    continue
                with open(os.path.join(dirpath, f), encoding="utf-8") as src:
                    names.update(CTOR.findall(src.read()))
    return names


def main():
    tool, cli, runtime, offline, root = sys.argv[1:6]
    cli_syms = nm(tool, cli, "--defined-only")
    cli_names = {n for _, n in cli_syms}
    cli_demangled = [n for _, n in nm(tool, cli, "--defined-only", "-C")]
    runtime_only = strong_globals(tool, runtime, INTERPOSERS) - strong_globals(tool, offline)
    bad = []

    for name in INTERPOSERS + RUNTIME_ENTRIES:
        if name not in runtime_only:
            sys.exit("%s is not a symbol only the runtime defines: update this test" % name)
        if name in cli_names:
            bad.append("defines %s (runtime%s)" % (
                name, " interposer" if name in INTERPOSERS else ""))
    for frag in RUNTIME_CXX:
        hits = [n for n in cli_demangled if frag in n]
        if hits:
            bad.append("defines %s (runtime), e.g. %s" % (frag.rstrip("(:"), hits[0]))

    ctors = constructors(root)
    if len(ctors) < 5:
        sys.exit("found only %d runtime constructors in the sources: update this test" % len(ctors))
    for c in sorted(ctors):
        # A C++ function demangles with its parameters, a C one is its bare name.
        pat = re.compile(r"(^|::)%s(\(|$)" % re.escape(c))
        hits = [n for n in cli_demangled if pat.search(n)]
        if hits:
            bad.append("has the runtime constructor %s" % hits[0])

    leaked = sorted(runtime_only & cli_names)
    if leaked:
        bad.append("defines %d symbol(s) only the runtime defines, e.g. %s" % (
            len(leaked), ", ".join(leaked[:8])))

    for b in bad:
        print("%s: %s" % (cli, b))
    if bad:
        sys.exit("the command carries the in-process runtime (it must link dprobe_offline only)")
    print("%s: no runtime interposer, trampoline or constructor (%d interposers, %d entry "
          "points, %d constructors, %d runtime-only symbols checked)" % (
              cli, len(INTERPOSERS), len(RUNTIME_ENTRIES) + len(RUNTIME_CXX), len(ctors),
              len(runtime_only)))


if __name__ == "__main__":
    main()

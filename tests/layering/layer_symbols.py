#!/usr/bin/env python3
"""Layers call down only, checked where it cannot be dodged: in the objects. Every layer
goes into one libdprobe.so, so a lower layer could call an upper one through a declaration
of its own (`void tracefs_fn();` in core/ compiles and links). For each layer this reads,
with nm, the symbols its objects leave undefined and fails when one is defined by a layer
above or beside it (tools -> tracefs -> {fprobe, kprobe} -> core -> arch) and by no layer at
or below it. Symbols no layer defines (the C library, libelf, ...) are not this test's
business; the links with --no-undefined see to them.

  layer_symbols.py NM LAYER=FILE[:FILE...] ...

A FILE is an object or a static archive; each layer named in RANK must be given (its
offline and runtime objects, cmake/dprobe.cmake). A LAYER may be given more than once.
"""
import subprocess
import sys

RANK = {"arch": 0, "core": 1, "fprobe": 2, "kprobe": 2, "tracefs": 3, "tools": 4}
DEFINED = set("TDBRVWGSiu")  # text, data, bss, read-only, weak, small, ifunc, unique
UNDEFINED = set("Uwv")


def below_or_same(user, owner):
    return owner == user or RANK[owner] < RANK[user]


def symbols(tool, files):
    """(defined, undefined) for FILES: {name}, {name: [object, ...]}."""
    out = subprocess.run([tool, "-A", "-P", "-g", *files], check=True, capture_output=True,
                         text=True).stdout
    defined, undefined = set(), {}
    for line in out.splitlines():
        # "file.o: name T value size" or "lib.a[member.o]: name U"
        where, _, rest = line.rpartition(": ")
        parts = rest.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind in DEFINED:
            defined.add(name)
        elif kind in UNDEFINED:
            undefined.setdefault(name, []).append(where)
    return defined, undefined


def demangle(tool, names):
    cxxfilt = tool[:-2] + "c++filt" if tool.endswith("nm") else "c++filt"
    try:
        out = subprocess.run([cxxfilt], input="\n".join(names), capture_output=True,
                             text=True, check=True).stdout.splitlines()
        return dict(zip(names, out))
    except (OSError, subprocess.CalledProcessError):
        return {n: n for n in names}


def system_symbols(tool, libs):
    names = set()
    for lib in libs:
        out = subprocess.run([tool, "-D", "-P", "--defined-only", lib], check=True,
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            name = line.split()[0] if line.split() else ""
            names.add(name.split("@")[0])
    return names


def upcall_list(path):
    allowed = {}
    if not path:
        return allowed
    with open(path) as f:
        for n, line in enumerate(f, 1):
            words = line.split()
            if len(words) < 2 or words[0].startswith("#"):
                continue
            if words[0] not in RANK:
                sys.exit("%s:%d: unknown layer %s" % (path, n, words[0]))
            allowed[(words[0], words[1])] = "%s:%d" % (path, n)
    return allowed


def main():
    tool = sys.argv[1]
    args = sys.argv[2:]
    upcalls, system = None, []
    files = {}
    while args and args[0].startswith("--"):
        opt = args.pop(0)
        if opt == "--upcalls":
            upcalls = args.pop(0)
        elif opt == "--system":
            while args and "=" not in args[0] and not args[0].startswith("--"):
                system.append(args.pop(0))
        else:
            sys.exit("unknown option %s" % opt)
    for arg in args:
        layer, _, paths = arg.partition("=")
        if layer not in RANK:
            sys.exit("unknown layer %s (layers: %s)" % (layer, ", ".join(RANK)))
        files.setdefault(layer, []).extend(p for p in paths.split(":") if p)
    if set(files) != set(RANK) or not all(files.values()):
        sys.exit("every layer needs its objects: got %s" % sorted(l for l in files if files[l]))

    defined, undefined = {}, {}
    for layer, paths in files.items():
        defined[layer], undefined[layer] = symbols(tool, paths)
    if not all(defined.values()):
        sys.exit("a layer defines no symbol: %s" % [l for l in RANK if not defined[l]])

    external = system_symbols(tool, system)
    allowed = upcall_list(upcalls)
    used = set()
    bad = []
    for user in RANK:
        for name, where in sorted(undefined[user].items()):
            owners = [l for l in RANK if name in defined[l]]
            if not owners or any(below_or_same(user, o) for o in owners):
                continue
            if name in external:
                continue
            if (user, name) in allowed:
                used.add((user, name))
                continue
            bad.append((user, name, owners, sorted(set(where))))
    names = demangle(tool, [b[1] for b in bad])
    for user, name, owners, where in bad:
        print("%s calls up: %s (defined in %s) referenced by %s" % (
            user, names.get(name, name), "/".join(owners), ", ".join(where[:3])))
    for key in sorted(set(allowed) - used):
        print("%s: %s %s is listed as an upcall but no object of %s references it: remove it" % (
            allowed[key], key[0], key[1], key[0]))
        bad.append(key)
    checked = sum(len(u) for u in undefined.values())
    if bad:
        sys.exit("%d reference(s) from a layer to one above or beside it" % len(bad))
    print("%d undefined references in %d layers: each is defined at or below its layer, outside "
          "dprobe, or one of the %d listed upcalls" % (checked, len(RANK), len(used)))


if __name__ == "__main__":
    main()

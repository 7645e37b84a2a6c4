#!/bin/sh
# The README's C API example, as a user meets it: its app.c and its build commands, taken
# from README.md as they are written there, run against the package installed into a fresh
# prefix (pkg-config finds it through PKG_CONFIG_PATH, the program finds libdprobe.so through
# LD_LIBRARY_PATH, as the README says for a prefix outside the loader's paths). The program's
# output must be the one the README shows, addresses aside.
set -eu
build="$1"; readme="$2"
cc="${CC:-cc}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
pcdir=$(dirname "$(find "$tmp/prefix" -name dprobe.pc | head -1)")
libdir=$(dirname "$pcdir")

# The blocks of the section "Five minutes with the C API": the ```c block (the program), the
# ```sh block after it (its build and run), and the bare ``` block after that (its output).
python3 - "$readme" "$tmp" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
sec = text[text.index("## Five minutes with the C API"):]
sec = sec[:sec.index("\n## ", 1)]
blocks = re.findall(r"^```(\w*)\n(.*?)^```$", sec, re.M | re.S)
c = [b for lang, b in blocks if lang == "c"]
i = [lang for lang, b in blocks].index("c")
sh, out = blocks[i + 1], blocks[i + 2]
assert len(c) == 1 and sh[0] == "sh" and out[0] == "", (c, sh, out)
open(sys.argv[2] + "/app.c", "w").write(c[0])
open(sys.argv[2] + "/build.sh", "w").write(sh[1])
open(sys.argv[2] + "/expected", "w").write(out[1])
PY
# `gcc` as the README writes it is the compiler the build uses.
cd "$tmp"
printf 'gcc() { "%s" "$@"; }\n' "$cc" | cat - build.sh > run.sh
PKG_CONFIG_PATH="$pcdir" LD_LIBRARY_PATH="$libdir" sh -e run.sh > actual
mask() { sed -E 's/0x[0-9a-f]+/ADDR/g' "$1"; }
if ! mask expected | diff -u - "$(mask actual > actual.masked; echo actual.masked)"; then
    echo "readme_check: the README example's output differs (above)"
    exit 1
fi
echo "readme_check: the README's C example builds from $tmp/prefix and prints what it shows: ok"

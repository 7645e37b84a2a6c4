#!/bin/sh
# Installs the build into a fresh prefix and builds a user's program against it, with
# pkg-config and with CMake's find_package(dprobe), and records a program with the installed
# command: the installed package must work wherever it is put (not only at the prefix the
# build was configured with).
set -eu
build="$1"; src="$(cd "$(dirname "$0")" && pwd)"
cc="${CC:-cc}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
pcdir=$(dirname "$(find "$tmp/prefix" -name dprobe.pc | head -1)")
libdir=$(dirname "$pcdir")

# pkg-config
flags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs dprobe)
"$cc" -O2 -pg -mfentry -c "$src/app.c" -o "$tmp/app.o" $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags dprobe)
"$cc" "$tmp/app.o" -o "$tmp/app_pc" $flags -Wl,-rpath,"$libdir"
"$tmp/app_pc"

# find_package
mkdir -p "$tmp/consumer"
cat > "$tmp/consumer/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(dprobe REQUIRED)
add_executable(app "$src/app.c")
target_compile_options(app PRIVATE -O2 -pg -mfentry)
target_link_libraries(app PRIVATE dprobe::dprobe)
CMAKE
cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_BUILD_RPATH="$libdir" > "$tmp/consumer.log"
cmake --build "$tmp/consumer/build" > "$tmp/consumer-build.log"
"$tmp/consumer/build/app"
# The agent and the allocator of its private namespace side by side (the agent loads it from
# its own directory, arch/x86_64/private_ns.h), and the installed command recording with them.
preload=$(find "$tmp/prefix" -name libdprobe-preload.so | head -1)
if [ -z "$preload" ] || [ ! -f "$(dirname "$preload")/libdprobe-nsalloc.so" ]; then
  echo "install_check: libdprobe-preload.so and libdprobe-nsalloc.so not installed together" >&2
  exit 1
fi
"$tmp/prefix/bin/dprobe" record -q -o "$tmp/true.dat" -- /bin/true

echo "install_check: pkg-config and find_package(dprobe) from $tmp/prefix, dprobe record: ok"

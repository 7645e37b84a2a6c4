#!/bin/sh
# Installs the build into a fresh prefix and builds a user's program against it, with
# pkg-config and with CMake's find_package(dprobe): the installed package must work
# wherever it is put (not only at the prefix the build was configured with).
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
echo "install_check: pkg-config and find_package(dprobe) from $tmp/prefix: ok"

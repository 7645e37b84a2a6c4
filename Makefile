# dprobe top-level Makefile: thin wrapper around CMake.
BUILD   ?= build
PREFIX  ?= /usr/local
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo

.PHONY: all setup configure build check run install bench peers asan clean

all: build

setup:
	@bash scripts/setup

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) -DCMAKE_INSTALL_PREFIX=$(PREFIX)

configure: $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

check: setup
	$(MAKE) build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

run: setup
	$(MAKE) build
	@bash scripts/run-demo $(BUILD)

bench: setup
	$(MAKE) build
	@bash scripts/run-bench $(BUILD)

# dprobe side by side with kernel uprobes, LLVM XRay and uftrace (Documentation/overhead.md).
peers: setup
	@python3 bench/peers/run --build $(BUILD)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD)

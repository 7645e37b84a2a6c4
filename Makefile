# dprobe top-level Makefile: thin wrapper around CMake.
BUILD   ?= build
PREFIX  ?= /usr/local
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo
# The ASan+UBSan build of the whole suite, and the seconds each libFuzzer target runs.
ASAN_BUILD ?= build-asan
# Line tables are all a sanitizer report needs: -g1 compiles the instrumented tree in about
# two thirds of the time -g takes (tests that read their own DWARF - the tracefs unit tests,
# tests/e2e and tests/libtracefs - and the fixtures ask for -g themselves).
ASAN_DEBUG_FLAGS ?= -DCMAKE_C_FLAGS_RELWITHDEBINFO='-O2 -g1 -DNDEBUG' \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO='-O2 -g1 -DNDEBUG'
FUZZ_SECONDS ?= 45

.PHONY: all setup setup-check configure build check check-format check-asan check-fuzz run install bench peers clean

all: build

setup:
	@bash scripts/setup

# The tools only the tests use (Chromium, protoc, Go for tests/report), on top of setup's.
setup-check:
	@bash scripts/setup --check

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) -DCMAKE_INSTALL_PREFIX=$(PREFIX)

configure: $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# Everything CI runs: the format check, the test suite, the same suite under ASan+UBSan,
# and the fuzzers.
check: setup-check
	$(MAKE) check-format
	$(MAKE) build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300
	$(MAKE) check-asan
	$(MAKE) check-fuzz

# The test suite built with -fsanitize=address,undefined (Documentation/reliability.md),
# all but the CLI end-to-end tests (dprobe record and dprobe attach on uninstrumented
# programs, the readers', isolation and lifecycle tests built on them; they run in the normal
# build): ASAN_E2E=1 runs the record ones too. Three
# reliability cases that meet ASan's own interceptors (swapcontext, sigaction,
# __asan_handle_no_return) are left out too, and the signal-mask cases (kprobe_sigmask_test:
# ASan's libasan defines pthread_sigmask and sigprocmask ahead of the static archive, so the
# linker takes no interposer from it), and two forks of a process whose other
# threads run, whose child then allocates (ASan's allocator is not locked across fork)
# (Documentation/reliability.md, "Sanitizers"). The report formats' tests (tests/report) record
# with the agent too and run the real readers (Chromium, go tool pprof, protoc) on the files:
# they run in the normal build.
ASAN_SKIP := -E '^($(if $(ASAN_E2E),,dprobe_cli_|dwarf_e2e_|sdt_e2e_|trace_dat_report$$|)dprobe_report_|dprobe_attach_|agent_isolation_|dprobe_readers_|dprobe_lifecycle_|kinds/flow\.swapcontext_coroutines_|kinds/signals\.program_sigtrap_handler_|sigmask\.|kinds/thread_exit\.cancelled_at_a_cancellation_point_|fprobe_follow_stress\.fork_while_following$$|kinds/processes\.fork_while_other_threads_run_probed_code/kretprobe)'
check-asan: setup
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDPROBE_SANITIZE=ON \
	  -DDPROBE_BENCH=OFF $(ASAN_DEBUG_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600 $(ASAN_SKIP)

# Every C and C++ file as .clang-format says (scripts/check-format --fix reformats).
check-format: setup
	bash scripts/check-format

# The libFuzzer targets (clang), FUZZ_SECONDS each, side by side (scripts/fuzz).
check-fuzz: setup
	bash scripts/fuzz $(FUZZ_SECONDS)

# The demo needs the CLI, the agent and the demo program only: a fresh machine reaches it
# without building the tests and benchmarks.
run: setup
	$(MAKE) configure
	cmake --build $(BUILD) -j $(JOBS) --target dprobe_cli dprobe_preload wordfreq
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
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz

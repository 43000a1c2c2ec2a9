# Makefile: the entry point. Every target is idempotent and works on a
# fresh Debian machine (`make deps` installs what is missing).
#
#   make deps     install missing build dependencies (apt-get, only if needed)
#   make build    release build (build/release)
#   make demo     release build, then run the demo example; it writes its
#                 profile to build/release: demo-trace.json, demo-timeline.html,
#                 demo-schedule.dot (and .svg with Graphviz)
#   make test     release, asan, tsan and fuzz phases: configure + build +
#                 ctest, stopping at the first failing phase, with a timing
#                 line each (fuzz: the corpus once, a 60 s fuzzing slice,
#                 and the planted-bug checks of the harness; docs/fuzzing.md)
#   make asan     the asan phase only          make tsan   the tsan phase only
#   make debug    debug build (build/debug)
#   make stress   tsan build, then every stress program with --long (its
#                 default seed, then STRESS_SEEDS more: seeds 1..n)
#   make bench    release build (and libstagehand_notrace.so, the library
#                 without the trace code), then every benchmark (JSON lines
#                 on stdout)
#   make fuzz     fuzz build (clang, build/fuzz), then FUZZ_SECONDS of fuzzing
#                 from fuzz/corpus; new inputs go to build/fuzz/fuzz-run/new
#   make fuzz-merge  minimize fuzz/corpus together with those new inputs
#                 (libFuzzer -merge=1) and replace fuzz/corpus with the result
#   make clean    remove build/
#
# Knobs: JOBS (default: nproc), STRESS_TIMEOUT (seconds per stress run),
# STRESS_SEEDS (extra seeds per stress program, default 0), STRESS_PRESET
# (the build `make stress` runs: tsan, or release / asan / debug for a
# quicker sweep), BENCH_TIMEOUT (seconds per benchmark, 0 = none),
# FUZZ_SECONDS (seconds of fuzzing for make fuzz, default 600).

SHELL := /bin/sh

JOBS ?= $(shell nproc 2>/dev/null || echo 2)
STRESS_TIMEOUT ?= 3600
STRESS_SEEDS ?= 0
STRESS_PRESET ?= tsan
BENCH_TIMEOUT ?= 0
FUZZ_SECONDS ?= 600
export JOBS

PHASE := sh cmake/phase.sh

.PHONY: all help deps build debug demo test asan tsan stress bench fuzz fuzz-merge clean

all: build

help:
	@sed -n '3,28p' Makefile | sed 's/^# \{0,1\}//'

deps:
	@sh cmake/deps.sh

build: deps
	@$(PHASE) release build

debug: deps
	@$(PHASE) debug build

demo: build
	@if [ ! -x build/release/examples/demo ]; then \
		echo "make demo: build/release/examples/demo was not built (is there an examples/demo.c?)" >&2; \
		exit 1; \
	fi
	./build/release/examples/demo --out build/release

test: deps
	@mkdir -p build && rm -f build/phases.txt
	@$(PHASE) release
	@$(PHASE) asan
	@$(PHASE) tsan
	@$(PHASE) fuzz
	@echo "== make test: all phases passed"
	@cat build/phases.txt

asan: deps
	@$(PHASE) asan

tsan: deps
	@$(PHASE) tsan

stress: deps
	@$(PHASE) $(STRESS_PRESET) build
	@if [ "$(STRESS_PRESET)" = tsan ]; then ECS_SPIN_US=0; export ECS_SPIN_US; fi; \
	STRESS_SEEDS=$(STRESS_SEEDS) sh cmake/run-programs.sh stress build/$(STRESS_PRESET)/stress/stress-programs.txt $(STRESS_TIMEOUT) --long

# libstagehand_notrace.so (the library without the trace code, which
# bench_trace loads next to libstagehand.so) is not in the default build.
bench: deps
	@$(PHASE) release build
	@unset MAKEFLAGS MFLAGS MAKELEVEL; cmake --build build/release --target stagehand_notrace_shared -j $(JOBS)
	@sh cmake/run-programs.sh bench build/release/bench/bench-programs.txt $(BENCH_TIMEOUT)

FUZZER := build/fuzz/fuzz/fuzz_world

fuzz: deps
	@$(PHASE) fuzz build
	@sh fuzz/run.sh fuzz $(FUZZER) fuzz/corpus build/fuzz/fuzz-run $(FUZZ_SECONDS)

fuzz-merge: deps
	@$(PHASE) fuzz build
	@sh fuzz/run.sh merge $(FUZZER) fuzz/corpus build/fuzz/fuzz-run/new

clean:
	rm -rf build

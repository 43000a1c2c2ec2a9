# Makefile: the entry point. Every target is idempotent and works on a
# fresh Debian machine (`make deps` installs what is missing).
#
#   make deps     install missing build dependencies (apt-get, only if needed)
#   make build    release build (build/release)
#   make demo     release build, then run the demo example
#   make test     release, asan and tsan phases: configure + build + ctest,
#                 stopping at the first failing phase, with a timing line each
#   make asan     the asan phase only          make tsan   the tsan phase only
#   make debug    debug build (build/debug)
#   make stress   tsan build, then every stress program with --long (its
#                 default seed, then STRESS_SEEDS more: seeds 1..n)
#   make bench    release build, then every benchmark (JSON lines on stdout)
#   make clean    remove build/
#
# Knobs: JOBS (default: nproc), STRESS_TIMEOUT (seconds per stress run),
# STRESS_SEEDS (extra seeds per stress program, default 0), STRESS_PRESET
# (the build `make stress` runs: tsan, or release / asan / debug for a
# quicker sweep), BENCH_TIMEOUT (seconds per benchmark, 0 = none).

SHELL := /bin/sh

JOBS ?= $(shell nproc 2>/dev/null || echo 2)
STRESS_TIMEOUT ?= 3600
STRESS_SEEDS ?= 0
STRESS_PRESET ?= tsan
BENCH_TIMEOUT ?= 0
export JOBS

PHASE := sh cmake/phase.sh

.PHONY: all help deps build debug demo test asan tsan stress bench clean

all: build

help:
	@sed -n '3,19p' Makefile | sed 's/^# \{0,1\}//'

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
	./build/release/examples/demo

test: deps
	@mkdir -p build && rm -f build/phases.txt
	@$(PHASE) release
	@$(PHASE) asan
	@$(PHASE) tsan
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

bench: deps
	@$(PHASE) release build
	@sh cmake/run-programs.sh bench build/release/bench/bench-programs.txt $(BENCH_TIMEOUT)

clean:
	rm -rf build

# backprop-bench: the verbs. CMake does the building (CMakeLists.txt); each verb is one line.
#   make bench [FILTER=regex] [WORKLOADS=a,b] [SIZES="nodes=10,1000 batch=1,8"] [BACKENDS=...]
#              [REPETITIONS=10] [THREADS=1] [PRECISION=bf16] [ISA=avx2|avx512] [WARMUP=3]
#              [MEMORY=8G [FORCE=1]]
#              [DATA=file] [RANKS=2]   (RANKS alone: the study ranks, data parallel over N ranks)
#              [BACKGROUND=N[,NICE]]   (N busy processes beside the timed steps: a busy machine)
#              [CHECKPOINTS=/some/disk]   (where engine_multistage writes; default: the run's folder)
#              [PLANS=dir]   (the compiled mode's plan cache; default: off, compiled from scratch)
#   make study NAME=bptt|budget|first_step|kernels|threads|contention|optim|gradbench|ranks|isa|...
#                                         (the same variables; bench_run --list names them all)
#   make bench-all                        (every backend, size and study at once)
#   make bench RESUME=results/<run-id>    (finishes an interrupted run)
#   make compare BASELINE=results/<before> NEW=results/<after> [THRESHOLD=10] [FORCE=1]
#                                         (exit 1: the new run is slower)
#   make check (unit tests)   make test (everything, as CI)   make plots RUN=results/<run-id>
#   make history   make format   make clean
BUILD := build
PYTHON := /usr/bin/python3
SOURCES = $(shell find apps engine workloads harness baselines studies dev -name '*.h' -o -name '*.cc' | sort)
# User strings never reach a shell or make's own expansion: each is read unexpanded ($(value)),
# single-quoted with its quotes escaped, not exported to the recipes' environment, and not passed
# on in MAKEFLAGS (the make that `cmake --build` runs would expand them).
USER_VARS := FILTER WORKLOADS SIZES BACKENDS DATA REPETITIONS THREADS PRECISION ISA WARMUP MEMORY \
             FORCE RANKS RUN RESUME BASELINE NEW THRESHOLD CHECKPOINTS PLANS NAME BACKGROUND
unexport $(USER_VARS)
MAKEOVERRIDES :=
quote = '$(subst ','\'',$(1))'
arg = $(if $(value $(1)),$(2) $(call quote,$(value $(1))))
BENCH_ARGS = $(call arg,FILTER,--filter) $(call arg,WORKLOADS,--workloads) \
  $(foreach s,$(value SIZES),--sizes $(call quote,$(s))) $(call arg,BACKENDS,--backends) \
  $(call arg,DATA,--data) $(call arg,REPETITIONS,--repetitions) $(call arg,THREADS,--threads) \
  $(call arg,PRECISION,--precision) $(call arg,ISA,--isa) $(call arg,RANKS,--ranks) \
  $(call arg,WARMUP,--warmup-steps) $(call arg,MEMORY,--memory-limit) $(if $(value FORCE),--force) \
  $(call arg,CHECKPOINTS,--checkpoint-dir) $(call arg,PLANS,--cache-dir) \
  $(call arg,BACKGROUND,--background)
# RESUME=results/<run-id> finishes an interrupted run with its own options (bench_run --resume).
RUN_FOLDER = $(if $(value RESUME),--resume $(call quote,$(value RESUME)),--out results)
COMPARE_ARGS = $(if $(value BASELINE),$(call quote,$(value BASELINE))) \
  $(if $(value NEW),$(call quote,$(value NEW))) \
  $(call arg,THRESHOLD,--threshold) $(if $(value FORCE),--force)
# A new tree builds with Ninja, whose units start before the libraries they link are made (make's
# wait for them: dev/notes.md, "Ninja"); a tree configured before keeps its generator.
generator = $(if $(wildcard $(1)/CMakeCache.txt),,-G Ninja)
CONFIGURE = cmake -S . -B $(BUILD) $(call generator,$(BUILD)) -DCMAKE_BUILD_TYPE=Release

.PHONY: all deps build build-unit sanitize check test bench bench-all study compare plots history \
        format clean
all: build
deps: ; @sh harness/install-deps.sh
build: deps ; $(CONFIGURE) > /dev/null && cmake --build $(BUILD) -j2
build-unit: deps ; $(CONFIGURE) > /dev/null && cmake --build $(BUILD) -j2 --target unit_tests
# The engine, workloads and harness tests again under AddressSanitizer and UBSan (CMakeLists.txt),
# built without the optional kernel libraries, so that such a build stays tested too.
sanitize: deps
	cmake -S . -B $(BUILD)-sanitize $(call generator,$(BUILD)-sanitize) -DCMAKE_BUILD_TYPE=Debug \
	  -DBP_SANITIZE=ON -DBP_KERNEL_LIBRARIES=OFF > /dev/null
	cmake --build $(BUILD)-sanitize -j2 && cd $(BUILD)-sanitize && ctest --output-on-failure -j2
# Two tests at a time, as the machines have two cores (CMakeLists.txt says what that allows).
check: build-unit ; cd $(BUILD) && ctest --output-on-failure -j2 -L unit
# Everything, as CI runs it; the lab's measurement programs (dev/) are built too, so they cannot rot.
test: deps sanitize
	$(CONFIGURE) -DBP_DEV=ON > /dev/null && cmake --build $(BUILD) -j2 && cd $(BUILD) && ctest --output-on-failure -j2
bench: build ; $(BUILD)/bench_run $(RUN_FOLDER) $(BENCH_ARGS)
bench-all: build ; $(BUILD)/bench_run --study all --out results $(BENCH_ARGS)
study: build ; $(BUILD)/bench_run --study $(if $(value NAME),$(call quote,$(value NAME)),'') --out results $(BENCH_ARGS)
compare: build ; $(BUILD)/bench_run compare $(COMPARE_ARGS)
history: ; $(PYTHON) plots/history.py results
plots: ; $(PYTHON) plots/plot.py $(if $(value RUN),$(call quote,$(value RUN)),results/latest)
# Only the files that are not in the style are rewritten, so the build does not start over.
format: deps ; @for f in $(SOURCES); do clang-format --dry-run -Werror $$f 2>/dev/null || \
  { echo "format: $$f"; clang-format -i $$f; }; done
clean: ; rm -rf $(BUILD) $(BUILD)-sanitize

# backprop-bench: the verbs. CMake does the building (CMakeLists.txt); each verb is one line.
#   make bench [FILTER=regex] [WORKLOADS=a,b] [SIZES="nodes=10,1000 batch=1,8"] [BACKENDS=...]
#              [REPETITIONS=10] [THREADS=1] [WARMUP=3] [MEMORY=8G [FORCE=1]] [DATA=/usr/share/dict/words]
#              [CHECKPOINTS=/some/disk]   (where engine_multistage writes; default: the run's folder)
#   make bench RESUME=results/<run-id>    (finishes an interrupted run)
#   make compare A=results/<run-A> B=results/<run-B> [THRESHOLD=10] [FORCE=1]   (exit 1: slower)
#   make test (make sanitize too)     make plots RUN=results/<run-id>     make history
#   make format     make clean
BUILD := build
PYTHON := /usr/bin/python3
SOURCES := $(wildcard engine/*.h engine/*.cc workloads/*.h workloads/*.cc harness/*.h harness/*.cc \
                      baselines/*.h baselines/*.cc)
# User strings never reach a shell or make's own expansion: each is read unexpanded ($(value)),
# single-quoted with its quotes escaped, not exported to the recipes' environment, and not passed
# on in MAKEFLAGS (the make that `cmake --build` runs would expand them).
USER_VARS := FILTER WORKLOADS SIZES BACKENDS DATA REPETITIONS THREADS WARMUP MEMORY FORCE RUN RESUME \
             A B THRESHOLD CHECKPOINTS
unexport $(USER_VARS)
MAKEOVERRIDES :=
quote = '$(subst ','\'',$(1))'
arg = $(if $(value $(1)),$(2) $(call quote,$(value $(1))))
BENCH_ARGS = $(call arg,FILTER,--filter) $(call arg,WORKLOADS,--workloads) \
  $(foreach s,$(value SIZES),--sizes $(call quote,$(s))) $(call arg,BACKENDS,--backends) \
  $(call arg,DATA,--data) $(call arg,REPETITIONS,--repetitions) $(call arg,THREADS,--threads) \
  $(call arg,WARMUP,--warmup-steps) $(call arg,MEMORY,--memory-limit) $(if $(value FORCE),--force) \
  $(call arg,CHECKPOINTS,--checkpoint-dir)
# RESUME=results/<run-id> finishes an interrupted run with its own options (bench_run --resume).
RUN_FOLDER = $(if $(value RESUME),--resume $(call quote,$(value RESUME)),--out results)
COMPARE_ARGS = $(if $(value A),$(call quote,$(value A))) $(if $(value B),$(call quote,$(value B))) \
  $(call arg,THRESHOLD,--threshold) $(if $(value FORCE),--force)

.PHONY: all deps build sanitize test bench compare plots history format clean
all: build
deps: ; @sh harness/install-deps.sh
build: deps ; cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build $(BUILD) -j2
# The engine, workloads and harness tests again under AddressSanitizer and UBSan (CMakeLists.txt),
# built without the optional kernel libraries, so that such a build stays tested too.
sanitize: deps
	cmake -S . -B $(BUILD)-sanitize -DCMAKE_BUILD_TYPE=Debug -DBP_SANITIZE=ON -DBP_KERNEL_LIBRARIES=OFF > /dev/null
	cmake --build $(BUILD)-sanitize -j2 && cd $(BUILD)-sanitize && ctest --output-on-failure -j2
# Two tests at a time, as the machines have two cores (CMakeLists.txt says what that allows).
test: build sanitize ; cd $(BUILD) && ctest --output-on-failure -j2
bench: build ; $(BUILD)/bench_run $(RUN_FOLDER) $(BENCH_ARGS)
compare: build ; $(BUILD)/bench_run compare $(COMPARE_ARGS)
history: ; $(PYTHON) plots/history.py results
plots: ; $(PYTHON) plots/plot.py $(if $(value RUN),$(call quote,$(value RUN)),results/latest)
format: deps ; clang-format -i $(SOURCES)
clean: ; rm -rf $(BUILD) $(BUILD)-sanitize

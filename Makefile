# backprop-bench: the verbs. CMake does the building (CMakeLists.txt); each verb is one line.
#   make bench [FILTER=regex] [WORKLOADS=a,b] [SIZES="nodes=10,1000 batch=1,8"] [BACKENDS=...]
#              [REPETITIONS=5] [THREADS=1] [DATA=/usr/share/dict/words]
#   make test          make plots RUN=results/<run-id>          make format          make clean
BUILD := build
PYTHON := /usr/bin/python3
SOURCES := $(wildcard engine/*.h engine/*.cc workloads/*.h workloads/*.cc harness/*.h harness/*.cc \
                      baselines/*.h baselines/*.cc)
BENCH_ARGS = $(if $(FILTER),--filter '$(FILTER)') $(if $(WORKLOADS),--workloads $(WORKLOADS)) \
  $(foreach s,$(SIZES),--sizes $(s)) $(if $(BACKENDS),--backends $(BACKENDS)) $(if $(DATA),--data $(DATA)) \
  $(if $(REPETITIONS),--repetitions $(REPETITIONS)) $(if $(THREADS),--threads $(THREADS))

.PHONY: all deps build test bench plots format clean
all: build
deps: ; @sh harness/install-deps.sh
build: deps ; cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build $(BUILD) -j2
test: build ; cd $(BUILD) && ctest --output-on-failure
bench: build ; $(BUILD)/bench_run --out results $(BENCH_ARGS)
plots: ; $(PYTHON) plots/plot.py $(or $(RUN),results/latest)
format: deps ; clang-format -i $(SOURCES)
clean: ; rm -rf $(BUILD)

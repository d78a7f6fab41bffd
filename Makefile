# Thin wrapper around CMake. The README's two commands: `make run` and `make test`.
BUILD ?= build
# The sanitize build (make test-sanitize): its own folder, CPU only, ASan + UBSan.
BUILD_SANITIZE ?= build-sanitize
SANITIZE ?= address,undefined
JOBS ?= 2
CMAKE_FLAGS ?=
DATA ?= data/fashion-mnist
RUN_DIR ?= runs/demo
NP ?= 2
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1

.PHONY: all deps configure build test test-sanitize test-learning run data bench-cnn clean format

all: build

deps:
	bash tools/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# Every test but the learning checks (minutes each, timed: make test-learning).
test: deps build
	cd $(BUILD) && ctest --output-on-failure -j 1 --timeout 900 -LE '^learning$$'

# The learning checks of issue 24 (tests/learning): each CNN on 2 ranks reaches three times chance
# on planted synthetic classes within 10 minutes of this machine's CPU (about 30 minutes in all).
test-learning: deps build
	cd $(BUILD) && ctest --output-on-failure -j 1 --timeout 900 -L '^learning$$'

# Unit, MPI and command-line tests, then short seeded runs of the fuzz targets, built with
# ASan and UBSan (docs/sanitizers-and-fuzzing.md). RelWithDebInfo: -O2 with -g, usable stacks.
$(BUILD_SANITIZE)/CMakeCache.txt:
	cmake -S . -B $(BUILD_SANITIZE) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCALETRAIN_CUDA=OFF \
	  -DSCALETRAIN_SANITIZE=$(SANITIZE) $(CMAKE_FLAGS)

test-sanitize: deps $(BUILD_SANITIZE)/CMakeCache.txt
	cmake --build $(BUILD_SANITIZE) -j $(JOBS)
	cd $(BUILD_SANITIZE) && ctest --output-on-failure -j 1 --timeout 900 -L '^(unit|mpi|cli|fuzz)$$'

# Fashion-MNIST from Debian's dataset-fashion-mnist, as 4 train and 1 val shards.
$(DATA)/train: | build
	$(BUILD)/bin/scaletrain-data convert fashion-mnist --source /usr/share/datasets/fashion-mnist \
	  --output $(DATA) --shards 4

data: deps build $(DATA)/train

# The demo: resnet20 on Fashion-MNIST with 2 MPI ranks to 92% top-1 (inputs/resnet20_fashion_mnist.ini);
# --overwrite: every `make run` is a new run in $(RUN_DIR).
run: deps build data
	mpirun -np $(NP) --oversubscribe --bind-to none $(BUILD)/bin/scaletrain train --overwrite \
	  --config inputs/resnet20_fashion_mnist.ini --data $(DATA) --output-dir $(RUN_DIR)

# The ImageNet CNNs' CPU training images/s against PyTorch 1.13 (OpenBLAS, from make deps), side by
# side, and their all-reduce MB per compute ms (docs/performance.md, issue 24). About 10 minutes on a
# quiet 2-core VM (estimated), 20 under load 8-12 (measured).
BENCH_CNN_ARGS ?= 3 5 4
bench-cnn: deps build
	BIN=$(BUILD)/bin bash tools/bench_cnn.sh $(BENCH_CNN_ARGS)

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp')

clean:
	rm -rf $(BUILD) $(BUILD_SANITIZE)

# Thin wrapper around CMake. The README's two commands: `make run` and `make test`.
BUILD ?= build
# The sanitize build (make test-sanitize): its own folder, CPU only, ASan + UBSan.
BUILD_SANITIZE ?= build-sanitize
SANITIZE ?= address,undefined
JOBS ?= 2
# Tests run two at a time (CI's 90 minutes): those that look for their own processes or time
# themselves are RUN_SERIAL in tests/CMakeLists.txt. TEST_JOBS=1 runs them one by one.
TEST_JOBS ?= 2
CMAKE_FLAGS ?=
DATA ?= data/fashion-mnist
RUN_DIR ?= runs/demo
NP ?= 2
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1

.PHONY: all deps configure build test test-sanitize test-learning run data run-translation bench-cnn clean format

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
	cd $(BUILD) && ctest --output-on-failure -j $(TEST_JOBS) --timeout 900 -LE '^learning$$'

# The learning checks of issue 24 (tests/learning): each CNN on 2 ranks reaches three times chance
# on planted synthetic classes within 10 minutes of this machine's CPU (about 30 minutes in all).
test-learning: deps build
	cd $(BUILD) && ctest --output-on-failure -j 1 --timeout 900 -L '^learning$$'

# Unit and MPI tests, the command-line tests labelled sanitize, then short seeded runs of the fuzz
# targets, built with ASan and UBSan (docs/sanitizers-and-fuzzing.md). RelWithDebInfo: -O2 with
# -g, usable stacks.
$(BUILD_SANITIZE)/CMakeCache.txt:
	cmake -S . -B $(BUILD_SANITIZE) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCALETRAIN_CUDA=OFF \
	  -DSCALETRAIN_SANITIZE=$(SANITIZE) $(CMAKE_FLAGS)

test-sanitize: deps $(BUILD_SANITIZE)/CMakeCache.txt
	cmake --build $(BUILD_SANITIZE) -j $(JOBS)
	cd $(BUILD_SANITIZE) && ctest --output-on-failure -j $(TEST_JOBS) --timeout 900 -L '^(unit|mpi|fuzz|sanitize)$$'

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

# The Transformer on real text (README, docs/translation-text.md): English-German sentence pairs
# from Debian's packages (the Ding dictionary's examples, program catalogs; 500 held-out Ding
# pairs for BLEU), a subword vocabulary of about 8,000 built as the MLPerf reference builds it,
# then transformer-tiny on $(NP) ranks (inputs/transformer_tiny_debian_text.ini), BLEU after
# every epoch. At most 15 minutes on a 2-core machine.
TRANSLATION_TEXT ?= data/translation-text
TRANSLATION_DATA ?= data/translation
TRANSLATION_RUN ?= runs/translation
$(TRANSLATION_TEXT)/train.en:
	/usr/bin/python3 tools/translation_text.py --output $(TRANSLATION_TEXT)

$(TRANSLATION_DATA)/train: | $(TRANSLATION_TEXT)/train.en build
	mpirun -np $(NP) --oversubscribe --bind-to none $(BUILD)/bin/scaletrain-data translation \
	  --train-source $(TRANSLATION_TEXT)/train.en --train-target $(TRANSLATION_TEXT)/train.de \
	  --val-source $(TRANSLATION_TEXT)/test.en --val-target $(TRANSLATION_TEXT)/test.de \
	  --target-vocab-size 8000 --shards 2 --output $(TRANSLATION_DATA)

run-translation: deps build $(TRANSLATION_DATA)/train
	mpirun -np $(NP) --oversubscribe --bind-to none $(BUILD)/bin/scaletrain train --overwrite \
	  --config inputs/transformer_tiny_debian_text.ini --data $(TRANSLATION_DATA) --output-dir $(TRANSLATION_RUN)

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

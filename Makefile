# RetroKit: the two commands are `make demo` and `make test` (README.md). Both install missing
# Debian packages first (scripts/install-deps.sh), then configure and build in $(BUILD).
MAKEFLAGS += --no-print-directory
BUILD ?= build
CUDA ?= AUTO
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps demo-deps configure build test demo install fuzz sanitize clean

all: build

deps:
	@scripts/install-deps.sh build

demo-deps:
	@scripts/install-deps.sh demo

# Ninja where it is installed (scripts/install-deps.sh installs it): it compiles the tests while the library's
# CUDA kernels still compile, where make's generated files wait for each target's dependencies to finish (about 2
# of CI's 27 build minutes; docs/performance.md "Session 65"). A folder configured before keeps its generator (CMake
# refuses to switch one).
generator = $(if $(wildcard $(1)/CMakeCache.txt),,$(if $(shell command -v ninja),-G Ninja))

configure: deps
	@cmake -S . -B $(BUILD) $(call generator,$(BUILD)) -DCMAKE_BUILD_TYPE=Release -DRETRO_CUDA=$(CUDA) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

demo: demo-deps build
	examples/demo.sh $(BUILD)/bin demo-out

# the tools, libretrokit, bash completions and model configs under $(PREFIX) (bin/, lib/, share/): PREFIX=~/.local
# needs no root; DESTDIR stages a package
PREFIX ?= /usr/local
# (no build here: `sudo make install` after `make` must not configure or build as root)
install:
	@test -x $(BUILD)/bin/retro-chunk || { echo "make install: nothing built in $(BUILD)/ yet: run make first"; exit 2; }
	@cmake --install $(BUILD) --prefix "$(PREFIX)"

# libFuzzer targets (tests/fuzz/fuzz_NAME.cpp; clang; not part of CI): the .npy and .safetensors parsers, the JPEG
# and PNG decoders, the corpus readers (text, jsonl, gzip, zstd), the UTF-8 handling and tokenizers, a tokenizer.json
# rebuilt into a sentencepiece model, a torch.save file (pytorch_model.bin) and its unpickler. Runs each for
# FUZZ_SECONDS, one after another; its corpus grows in fuzz-out/NAME/corpus, a crash, leak, timeout or OOM input
# lands in fuzz-out/NAME/. FUZZ_TARGETS=image runs only some.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= npy safetensors image corpus text tokenizer_json torch_checkpoint
FUZZ_SEEDS_npy = tests/reference/fixtures
FUZZ_SEEDS_safetensors = tests/reference/fixtures
FUZZ_SEEDS_image = tests/reference/golden/clip_tiny/images tests/fuzz/seeds/image
FUZZ_SEEDS_corpus = tests/fuzz/seeds/corpus
FUZZ_SEEDS_text = tests/fuzz/seeds/text
FUZZ_SEEDS_tokenizer_json = tests/fuzz/seeds/tokenizer_json
FUZZ_SEEDS_torch_checkpoint = tests/fuzz/seeds/torch_checkpoint
define fuzz_run
@mkdir -p fuzz-out/$(1)/corpus
build-fuzz/fuzz_$(1) -max_total_time=$(FUZZ_SECONDS) -timeout=10 -print_final_stats=1 -artifact_prefix=fuzz-out/$(1)/ fuzz-out/$(1)/corpus $(FUZZ_SEEDS_$(1))

endef
fuzz: deps
	@cmake -S . -B build-fuzz $(call generator,build-fuzz) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRETRO_CUDA=OFF -DRETRO_FUZZ=ON -DBUILD_TESTING=OFF \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
	@cmake --build build-fuzz -j$(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	$(foreach t,$(FUZZ_TARGETS),$(call fuzz_run,$(t)))

# Everything under ASan + UBSan (CMake option RETRO_SANITIZE, CPU only, in build-sanitize) and the whole test suite
# on it, the host-emulated CUDA kernels in each warp schedule included (not in CI; docs/testing.md).
SANITIZE_ENV = ASAN_OPTIONS=detect_stack_use_after_return=1:detect_leaks=0:detect_container_overflow=0 UBSAN_OPTIONS=print_stacktrace=1
sanitize: deps
	@cmake -S . -B build-sanitize $(call generator,build-sanitize) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRETRO_CUDA=OFF -DRETRO_SANITIZE=ON >/dev/null
	@cmake --build build-sanitize -j$(JOBS)
	cd build-sanitize && $(SANITIZE_ENV) ctest --output-on-failure -j$(JOBS)

clean:
	rm -rf $(BUILD) build-fuzz build-sanitize

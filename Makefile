# RetroKit: the two commands are `make demo` and `make test` (README.md). Both install missing
# Debian packages first (scripts/install-deps.sh), then configure and build in $(BUILD).
MAKEFLAGS += --no-print-directory
BUILD ?= build
CUDA ?= AUTO
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps demo-deps configure build test demo fuzz sanitize clean

all: build

deps:
	@scripts/install-deps.sh build

demo-deps:
	@scripts/install-deps.sh demo

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DRETRO_CUDA=$(CUDA) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

demo: demo-deps build
	examples/demo.sh $(BUILD)/bin demo-out

# libFuzzer targets for the .npy and .safetensors parsers (clang; not part of CI).
# Runs each for FUZZ_SECONDS; crashes land in fuzz-out/.
FUZZ_SECONDS ?= 60
fuzz: deps
	@cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRETRO_CUDA=OFF -DRETRO_FUZZ=ON -DBUILD_TESTING=OFF \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
	@cmake --build build-fuzz -j$(JOBS) --target fuzz_npy fuzz_safetensors
	@mkdir -p fuzz-out/npy fuzz-out/safetensors
	build-fuzz/fuzz_npy -max_total_time=$(FUZZ_SECONDS) -artifact_prefix=fuzz-out/ fuzz-out/npy tests/reference/fixtures
	build-fuzz/fuzz_safetensors -max_total_time=$(FUZZ_SECONDS) -artifact_prefix=fuzz-out/ fuzz-out/safetensors tests/reference/fixtures

# Everything under ASan + UBSan (CMake option RETRO_SANITIZE, CPU only, in build-sanitize) and the whole test suite
# on it, the host-emulated CUDA kernels in each warp schedule included (not in CI; docs/testing.md).
SANITIZE_ENV = ASAN_OPTIONS=detect_stack_use_after_return=0:detect_leaks=0:detect_container_overflow=0 UBSAN_OPTIONS=print_stacktrace=1
sanitize: deps
	@cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRETRO_CUDA=OFF -DRETRO_SANITIZE=ON >/dev/null
	@cmake --build build-sanitize -j$(JOBS)
	cd build-sanitize && $(SANITIZE_ENV) ctest --output-on-failure -j$(JOBS)

clean:
	rm -rf $(BUILD) build-fuzz build-sanitize

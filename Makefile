# Ferry — top-level entry points. `make demo` and `make test` work on a fresh Debian 12 machine.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)
CMAKE_FLAGS = -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFERRY_WERROR=ON \
              -DFERRY_PYPI_NODE_DIR=$$(ls -d $(CURDIR)/.venv/lib/python3*/site-packages/onnx/backend/test/data/node 2>/dev/null | head -1)

.PHONY: deps build demo test test-release sanitize format clean

deps:
	scripts/install-deps

build: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	ninja -C $(BUILD) -j $(JOBS)

# Ferry's main job on the bundled example: inspect the model, run it, check it against its test data.
demo: build
	$(BUILD)/src/ferry inspect examples/digits_cnn/model.onnx
	$(BUILD)/src/ferry run examples/digits_cnn/model.onnx \
	  --input image=examples/digits_cnn/test_data_set_0/input_0.pb --output-dir $(BUILD)/demo-out
	$(BUILD)/src/ferry run examples/digits_cnn/model.onnx --test-data examples/digits_cnn

# Every test: the release build's suite, then the sanitizer build's.
test: test-release sanitize

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j 1

sanitize: deps
	cmake -S . -B $(ASAN_BUILD) $(CMAKE_FLAGS) -DFERRY_SANITIZE=ON -DFERRY_PYPI_NODE_DIR= \
	  -DFERRY_MODEL_CACHE=$(CURDIR)/$(BUILD)/models >/dev/null
	ninja -C $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j 1 -E 'differential|zoo_models_cnn|verify_models'

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)

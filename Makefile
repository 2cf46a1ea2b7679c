# Ferry — top-level entry points. `make demo` and `make test` work on a fresh Debian 12 machine.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
JOBS       ?= $(shell nproc)
# Line tables only (-g1): the same code as -g (debug info never changes GCC's output), a third
# less compile time.
CMAKE_FLAGS = -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFERRY_WERROR=ON \
              -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
              -DFERRY_PYPI_NODE_DIR=$$(ls -d $(CURDIR)/.venv/lib/python3*/site-packages/onnx/backend/test/data/node 2>/dev/null | head -1)
# The sanitizer builds: -O1 (what ASan and TSan recommend; compiles in half the time of -O2 -g).
# Warnings are the release build's job (-Werror there): -O1 warns differently.
SAN_FLAGS   = -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DFERRY_WERROR=OFF

.PHONY: deps build demo test test-release sanitize tsan fuzz-build fuzz fuzz-smoke format clean

deps:
	scripts/install-deps

build: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	ninja -C $(BUILD) -j $(JOBS)

# Ferry's main job on the bundled example: inspect the model, run it, check it against its test
# data, then build the release artifact (fp32 + int8, gated on the golden set), sign and verify it,
# then serve it (ferry serve: signature and golden set checked at load) and ask it for a
# prediction with the real Triton client, as a tensor and as a PNG (the artifact's prep.yaml).
demo: build
	$(BUILD)/src/ferry inspect examples/digits_cnn/model.onnx
	$(BUILD)/src/ferry run examples/digits_cnn/model.onnx \
	  --input image=examples/digits_cnn/test_data_set_0/input_0.pb --output-dir $(BUILD)/demo-out
	$(BUILD)/src/ferry run examples/digits_cnn/model.onnx --test-data examples/digits_cnn
	$(BUILD)/src/ferry build examples/digits_cnn/ferry.yaml -o $(BUILD)/demo-artifact --force
	$(BUILD)/src/ferry keys generate --out $(BUILD)/demo-key.pem --force
	$(BUILD)/src/ferry sign $(BUILD)/demo-artifact --key $(BUILD)/demo-key.pem
	$(BUILD)/src/ferry artifact verify $(BUILD)/demo-artifact --key $(BUILD)/demo-key.pub.pem --golden
	.venv/bin/python examples/digits_cnn/serve_demo.py --ferry $(BUILD)/src/ferry \
	  --artifact $(BUILD)/demo-artifact --key $(BUILD)/demo-key.pub.pem

# Every test: the release build's suite, then the sanitizer builds', then a short fuzzing run.
test: test-release sanitize tsan fuzz-smoke

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j 1

sanitize: deps
	cmake -S . -B $(ASAN_BUILD) $(CMAKE_FLAGS) $(SAN_FLAGS) -DFERRY_SANITIZE=ON -DFERRY_PYPI_NODE_DIR= \
	  -DFERRY_MODEL_CACHE=$(CURDIR)/$(BUILD)/models -DFERRY_STRESS_THREADS=1 >/dev/null
	ninja -C $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j 1 -E 'differential|zoo_models_cnn|verify_models|avx2_under_valgrind|cli_build_zoo|models_real'

# ThreadSanitizer: concurrent runs on shared sessions (the concurrency gtests, and the zoo stress
# test with one thread per run: libgomp's workers are invisible to TSan). Uses the release
# build's model cache (run after test-release, or it generates the zoo).
tsan: deps
	cmake -S . -B $(TSAN_BUILD) $(CMAKE_FLAGS) $(SAN_FLAGS) -DFERRY_TSAN=ON -DFERRY_PYPI_NODE_DIR= >/dev/null
	ninja -C $(TSAN_BUILD) -j $(JOBS) ferry_stress ferry_concurrency_tests
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 $(TSAN_BUILD)/tests/ferry_concurrency_tests
	/usr/bin/python3 tools/make_zoo.py --out $(BUILD)/models/zoo >/dev/null
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 /usr/bin/python3 tests/runtime/stress_concurrent.py \
	  --stress $(TSAN_BUILD)/tests/ferry_stress --zoo $(BUILD)/models/zoo --cache $(BUILD)/models \
	  --threads 1 --runs 12

# Fuzzing (fuzz/README.md): libFuzzer targets built by clang with ASan+UBSan in $(FUZZ_BUILD),
# only the libraries they need, at -O1 with line tables. Seeds are generated into the build tree.
FUZZ_TARGETS       = session passes audit_inspect npy tensorproto config http_request prep tokenizer
# `make fuzz`: 10 minutes per target (90 minutes for the nine); `make fuzz-smoke` (CI): 1 minute.
FUZZ_SECONDS       ?= 600
FUZZ_SMOKE_SECONDS ?= 60
fuzz-build: deps
	cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Fuzz \
	  -DCMAKE_CXX_FLAGS_FUZZ="-O1 -gline-tables-only" -DFERRY_FUZZ=ON >/dev/null
	ninja -C $(FUZZ_BUILD) -j $(JOBS) fuzz_all
	/usr/bin/python3 fuzz/make_seeds.py --out $(FUZZ_BUILD)/seeds --zoo $(BUILD)/models/zoo

# Each target for FUZZ_SECONDS; stops at the first crash (its input in $(FUZZ_BUILD)/findings/).
fuzz: fuzz-build
	for t in $(FUZZ_TARGETS); do fuzz/run.sh $(FUZZ_BUILD) $$t $(FUZZ_SECONDS) || exit 1; done

# CI: the regression corpus (every input that ever crashed; a failure fails the build), then each
# target from a fixed seed for a fixed number of inputs, about FUZZ_SMOKE_SECONDS each on a 2-core
# EPYC, never longer than twice that. A new finding of that short run is printed with its input
# (in $(FUZZ_BUILD)/findings/) and fails the build only with FUZZ_SMOKE_GATE=1: which inputs a
# run reaches depends on the CPU's kernel paths, so it is not a repeatable gate across machines;
# every finding is fixed and its input joins fuzz/corpus/, which is.
FUZZ_SMOKE_RUNS = session:20000 passes:3000 audit_inspect:11000 npy:1500000 tensorproto:1300000 \
                  config:300000 http_request:900000 prep:100000 tokenizer:80000
FUZZ_SMOKE_GATE ?= 0
fuzz-smoke: fuzz-build
	cd $(FUZZ_BUILD) && ctest --output-on-failure -j 1 -R fuzz_regression
	found=0; for tr in $(FUZZ_SMOKE_RUNS); do \
	  fuzz/run.sh $(FUZZ_BUILD) $${tr%%:*} $$(( 2 * $(FUZZ_SMOKE_SECONDS) )) -seed=1 -runs=$${tr##*:} || found=$$((found + 1)); \
	done; \
	if [ $$found -gt 0 ]; then \
	  echo "fuzz-smoke: NEW FINDINGS in $$found target(s), inputs in $(FUZZ_BUILD)/findings/ (FUZZ_SMOKE_GATE=$(FUZZ_SMOKE_GATE))"; \
	  [ "$(FUZZ_SMOKE_GATE)" = 0 ]; \
	fi

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)

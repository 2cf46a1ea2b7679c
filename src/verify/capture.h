// `ferry golden capture` as a library call: seeded input sets (plus edge cases: zeros, large,
// and for sequence dims the shortest and the longest length the model accepts), run through the
// model, stored with its outputs in the ONNX test-data layout plus a golden.json manifest (temp
// folder, then rename). The result renders as text, JSON (the manifest) or Markdown.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "verify/golden.h"

namespace ferry::verify {

struct GoldenCaptureOptions {
  std::string model, out;  // ONNX file, folder to create
  CaptureOptions capture;  // count, seed, shapes, ranges
  bool force = false;      // replace an existing `out` (only once the new one is complete)
  int threads = 0;
};

struct GoldenSetInfo {
  std::string kind;                                          // "random", "zeros", "large"...
  std::vector<std::pair<std::string, std::string>> inputs;   // name, "float32[1,3,8,8]"
  std::vector<std::pair<std::string, std::string>> outputs;  // name, type
  std::vector<std::pair<std::string, Shape>> input_shapes;   // tensor inputs only
};

struct GoldenCaptureResult {
  std::string model, out;
  std::string weights_sha256;
  uint64_t seed = 0;
  int count = 0;
  std::vector<std::string> notes;   // defaults chosen (symbolic dims, ranges, longest length)
  std::vector<GoldenSetInfo> sets;  // test_data_set_0, 1, ...
};

// Errors: kUsage (count or threads < 0, a --shape / --range naming no input...), kInvalid
// when `out` exists without `force`, the loader's and the engine's errors (naming the set).
Result<GoldenCaptureResult> CaptureGolden(const GoldenCaptureOptions& options);

std::string FormatText(const GoldenCaptureResult& r);
// The golden.json manifest written into the folder, plus "out".
std::string FormatJson(const GoldenCaptureResult& r);
std::string FormatMarkdown(const GoldenCaptureResult& r);

}  // namespace ferry::verify

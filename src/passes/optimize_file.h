// `ferry optimize` and `ferry convert` as library calls: read a model file, rewrite it (graph
// passes / opset or float16 conversion), prove the rewrite on seeded inputs (check.h), and
// write the result atomically; nothing is written when any step fails. Results render as text,
// JSON or Markdown.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "passes/check.h"
#include "passes/convert.h"
#include "passes/pass_manager.h"

namespace ferry::passes {

struct OptimizeFileOptions {
  std::string input, output;
  OptimizeOptions passes;                   // level, only, skip
  std::map<std::string, Shape> fix_shapes;  // inputs fixed in the output (and fed to the check)
  CheckOptions check;  // count 0: no check; shapes (--shape), data (--check-data)
};

struct OptimizeFileResult {
  std::string input, output;
  std::map<std::string, int64_t> ops_before, ops_after;  // "Op" / "domain.Op", subgraphs in
  int64_t nodes_before = 0, nodes_after = 0;
  std::vector<PassReport> passes;  // every pass run, in table order
  CheckOptions check;              // as run (count 0: skipped)
  CheckResult check_result;        // ok (a failed check is an error)
};

// Errors: kUsage for --check < 0 or an output that is the input file; the loader's and the
// passes' errors; kCheckFailed when an output differs ("the optimized model differs from IN:
// ... (passes that changed the graph: ...); nothing written"); the writer's errors.
Result<OptimizeFileResult> OptimizeFile(const OptimizeFileOptions& options);

std::string FormatText(const OptimizeFileResult& r);
std::string FormatJson(const OptimizeFileResult& r);
std::string FormatMarkdown(const OptimizeFileResult& r);

struct ConvertFileOptions {
  std::string input, output;
  int64_t opset = 0;  // > 0: convert the default-domain opset to it
  bool fp16 = false;  // or: float16 conversion with fp16_options (exactly one of the two)
  Fp16Options fp16_options;
  CheckOptions check;  // count 0: no check; shapes (--shape), data (--check-data)
};

struct ConvertFileResult {
  std::string input, output;
  int64_t opset_from = 0, opset_to = 0;  // opset conversion
  bool fp16 = false;
  Fp16Report fp16_report;  // float16 conversion (clamped initializers: warn the user)
  bool checked = false;
  CheckResult check_result;
  uintmax_t bytes_in = 0, bytes_out = 0;
};

// Errors: kUsage (not exactly one of opset / fp16, --check < 0, output = input); the
// converters' errors; kCheckFailed when the float16 model makes NaN/Inf where the original is
// finite, or the opset-converted model differs; nothing is written then.
Result<ConvertFileResult> ConvertFile(const ConvertFileOptions& options);

std::string FormatText(const ConvertFileResult& r);
std::string FormatJson(const ConvertFileResult& r);
std::string FormatMarkdown(const ConvertFileResult& r);

}  // namespace ferry::passes

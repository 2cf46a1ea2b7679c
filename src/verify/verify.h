// `ferry verify` as a library call, all three modes:
//  - compare: `reference` against `candidate` on the input sets of `data` (per output; with
//    per_layer every intermediate tensor by name, naming the first layer out of tolerance);
//  - golden: `model` against the expected outputs stored in `golden`;
//  - validate: `model` on `data`, finding the first layer that produces NaN or Inf (also
//    added to the other two modes with `validate`).
// The result is a verify::Report (report.h: FormatText, FormatJson, FormatMarkdown).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/progress.h"
#include "core/status.h"
#include "verify/compare.h"
#include "verify/golden.h"
#include "verify/report.h"

namespace ferry::verify {

struct VerifyOptions {
  std::string reference, candidate, data;  // compare mode
  // Compare and validate modes: input sets in memory (preprocessed inputs, a caller's arrays)
  // instead of reading `data` (which then only names them in the report).
  std::vector<DataSet> sets;
  std::string model, golden;  // golden mode (model + golden), validate (model + data)
  std::string labels;         // .npy of class ids for classifier outputs
  Tolerance tol{1e-4, 1e-3};
  std::map<std::string, Tolerance> tolerances;  // per output (per_layer: or node output)
  int64_t top_k = 5;
  int threads = 0;
  bool per_layer = false, validate = false;
  std::string command_line;  // echoed in the report (the caller's, e.g. the CLI's argv)
  ProgressFn progress;       // stages "reference", "candidate", "model"; one step per set
};

// Errors: kUsage for an inconsistent mode ("--reference and --candidate go together", ...;
// the messages name the CLI flags) or bad numbers; the loaders', the data folders' and the
// engine's errors (naming the model and set); kInvalid for labels that do not match the
// classifier rows. A failed comparison is not an error: see Report::pass().
Result<Report> Verify(const VerifyOptions& options);

}  // namespace ferry::verify

// `ferry calibrate` as a library call: prepare the model as quantize will (ferry optimize's
// passes), stream a calibration folder through it and write the calibration table (JSON,
// temp file + rename). The result renders as text, JSON or Markdown.
#pragma once

#include <string>

#include "core/progress.h"
#include "core/status.h"
#include "quant/calibrate.h"

namespace ferry::quant {

struct CalibrateFileOptions {
  std::string model, data, output;  // ONNX file, calibration folder, table to write
  CalibrateOptions calibrate;       // method, activation type, batch, max samples, threads
  ProgressFn progress;              // stage "calibrate", per run
};

struct CalibrateFileResult {
  std::string output;
  Table table;  // model, data, samples, runs, batch, method, tensors
};

// Errors: kUsage for max_samples < 0 or an output that is the model file; the loader's, the
// data folder's (prefixed "--data") and calibration's errors (prefixed "model 'M'"); the
// writer's (prefixed "-o").
Result<CalibrateFileResult> CalibrateFile(const CalibrateFileOptions& options);

std::string FormatText(const CalibrateFileResult& r);
std::string FormatJson(const CalibrateFileResult& r);
std::string FormatMarkdown(const CalibrateFileResult& r);

}  // namespace ferry::quant

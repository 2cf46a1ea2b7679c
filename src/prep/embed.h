// `ferry prep embed`: a spec's image steps that standard ONNX ops reproduce exactly, prepended
// to the model, so that it takes decoded uint8 HWC images. Steps ONNX cannot reproduce within
// the bar (src/prep/README.md) are refused, each named with the reason: embedding refuses
// rather than approximates. Decoding (and with it EXIF orientation and alpha) stays outside:
// the embedded model's input is the decoded image.
// Reentrant: no globals; the functions may run concurrently on different models.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "ir/graph.h"
#include "prep/spec.h"

namespace ferry::prep {

// What was prepended for one spec input.
struct EmbeddedInput {
  std::string name;                // the model input (now the raw image input)
  std::vector<std::string> dims;   // the raw input's dims ("1", "height", ...)
  std::vector<std::string> steps;  // one line per embedded step ("resize: pil_nearest ...")
  std::string prep_output;         // with keep_prep_outputs: the graph output holding the
                                   // tensor the model's own input receives
};

struct EmbedResult {
  std::vector<EmbeddedInput> inputs;
  int64_t opset = 0;  // the embedded model's default-domain opset
};

struct EmbedOptions {
  // Also exposes each prepended chain's result (what the model's input receives) as an extra
  // graph output `<input>__prep`, after the model's outputs (what --check compares).
  bool keep_prep_outputs = false;
};

// Rewrites `model` in place: each spec input's steps before the model input of that name.
// Errors, all before `model` is changed: kUnsupported naming the spec key and why ONNX cannot
// reproduce it (a resize filter other than the nearest ones, gray conversion,
// exif: apply, alpha compositing, table or text inputs); kInvalid when the spec and the
// model disagree (no such input, dtype, rank or a fixed dim that differs). A model below
// opset 13 is converted to 13 first (kUnsupported when the converter cannot).
Result<EmbedResult> EmbedSpec(ir::Model& model, const Spec& spec, const EmbedOptions& options = {});

// `ferry prep embed --check`: decoded images through the embedded model against spec-then-model,
// each under Ferry's runtime and under ONNX Runtime (the venv's python runs
// tools/prep_embed_ort.py).
struct EmbedCheckOptions {
  std::vector<std::string> images;  // image files (already expanded)
  std::string python, script;
  double atol = 1e-5, rtol = 1e-5;  // outputs: |a - b| <= atol + rtol * max|b|
};
struct EmbedCheckRow {
  std::string runtime;  // "ferry" | "onnxruntime"
  std::string tensor;   // a model output, or "<input>__prep" (the prepended steps' result)
  double max_abs_diff = 0, tolerance = 0;
  int64_t differing = 0, elements = 0;
  bool ok = true;
};
struct EmbedCheckResult {
  std::vector<EmbedCheckRow> rows;
  size_t images = 0;
  bool ok = true;
};
// `original` is the model before embedding, `embedded` the result of EmbedSpec with
// keep_prep_outputs. kInvalid for unreadable images or a failing reference process.
Result<EmbedCheckResult> CheckEmbedded(const ir::Model& original, const ir::Model& embedded,
                                       const Spec& spec, const EmbedCheckOptions& options);

// Drops the `<input>__prep` outputs EmbedSpec kept (the model users receive).
void DropPrepOutputs(ir::Model& model, const EmbedResult& result);

std::string FormatEmbedText(const EmbedResult& r, const EmbedCheckResult* check,
                            const std::string& out_path);
std::string FormatEmbedJson(const EmbedResult& r, const EmbedCheckResult* check,
                            const std::string& out_path);

}  // namespace ferry::prep

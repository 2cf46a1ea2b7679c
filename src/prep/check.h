// `ferry prep check`: the spec's tensors from Ferry against the library its filter names
// (Pillow or OpenCV, run by tools/prep_reference.py in the project venv), per tensor.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "prep/spec.h"

namespace ferry::prep {

struct CheckOptions {
  std::string spec_path;
  std::vector<std::string> images;  // files, or folders (their *.png, *.jpg, *.jpeg, sorted)
  std::string python;               // the interpreter with Pillow / OpenCV
  std::string script;               // tools/prep_reference.py
  std::string text_script;          // tools/prep_reference_text.py (text inputs: tokenizers)
};

struct TensorCheck {
  std::string input;
  std::string reference;  // "Pillow 13.0.0", "OpenCV 5.1.0"
  Shape shape;
  double max_abs = 0;
  int64_t differing = 0, total = 0;
  double tolerance = 0;        // max abs allowed
  double min_exact_share = 1;  // share of elements that must be exactly equal
  bool ok = false;
  std::string note;  // a shape mismatch, or what the tolerance covers
};

struct CheckResult {
  std::vector<std::string> images;
  std::vector<TensorCheck> tensors;
  bool ok = true;
};

// Folders expanded to their image files (sorted); kInvalid when nothing is left.
Result<std::vector<std::string>> ExpandImages(const std::vector<std::string>& items);

// Runs Ferry's pipeline and the reference on the same images and compares. kInvalid for a bad
// spec or image; kUsage when the reference cannot be run (no python, no script).
Result<CheckResult> Check(const CheckOptions& options);

// The bar per input: exact for nearest filters or no resize; resize.tensor: float: at most
// 1e-5; else at most one 8-bit step (in the output's units: |scale / std|) and >= 99.9% of
// elements exact.
void ToleranceFor(const ImageSpec& spec, double* max_abs, double* min_exact_share);

// Compares two tensors (same dtype and shape expected) into `out` (max_abs, differing, total).
void CompareTensors(const Tensor& ours, const Tensor& reference, TensorCheck* out);

std::string FormatCheckText(const CheckResult& r);
std::string FormatCheckJson(const CheckResult& r);

}  // namespace ferry::prep

// Model conversions behind `ferry convert`: opset conversion (libonnx's version converter)
// and float16 conversion (weights and compute in fp16, Casts at the boundaries).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "ir/graph.h"

namespace ferry::passes {

// Converts the default-domain opset to `target`. kUnsupported naming the op when the
// converter has no adapter for it; the converted model replaces `model`.
Status ConvertOpset(ir::Model& model, int64_t target);

// Whether every schema change of `op` between the two opsets only widened its types or added
// an attribute with a default (the op moves as is when those are not used).
bool IsTypeOnlyChange(const std::string& op, int64_t opset_a, int64_t opset_b);

struct Fp16Options {
  std::set<std::string> keep_fp32;  // op types or node names computed in float32
  bool keep_io_types = false;       // graph inputs/outputs stay float32 (Casts inside)
};

struct Fp16Report {
  std::vector<std::string> clamped;  // initializers with values outside fp16's range (clamped)
  int64_t converted_initializers = 0;
  int64_t casts_inserted = 0;
  int64_t fp32_nodes = 0;  // nodes kept in float32
};

// Float32 tensors become float16 where each op's schema allows it; nodes in `keep_fp32`,
// control-flow nodes and ops whose input is fixed float32 by the schema (Resize scales...)
// stay float32 with Casts around them. Initializer values beyond ±65504 are clamped (reported
// by name), never turned into Inf.
Result<Fp16Report> ConvertToFloat16(ir::Model& model, const Fp16Options& options);

}  // namespace ferry::passes

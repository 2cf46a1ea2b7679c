// `ferry inspect` as a library call: what a model holds (I/O, opsets, op histogram, parameters,
// weights checksum, metadata) and which of its ops Ferry's registry does not implement at the
// model's opset. The result renders as text, JSON or Markdown. Safe to call from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "ir/graph.h"
#include "ir/weights_digest.h"

namespace ferry::ops {

struct InspectResult {
  std::string model;  // the path inspected (as given)
  int64_t ir_version = 0, model_version = 0;
  std::string producer_name, producer_version, domain;
  std::vector<ir::OpsetImport> opset_imports;
  std::vector<ir::ValueInfo> inputs;  // real inputs (initializer-backed ones left out)
  std::vector<ir::ValueInfo> outputs;
  std::map<std::string, int64_t> op_histogram;  // "Op" or "domain.Op", subgraphs included
  int64_t node_count = 0;                       // subgraphs included
  int64_t initializer_count = 0;
  ir::WeightsDigest weights;
  bool control_flow = false;                 // an If, Loop or Scan anywhere
  std::set<std::string> custom_domains;      // domains other than the default and ai.onnx.ml
  std::vector<std::string> unsupported_ops;  // ops without a definition at the model's opset,
                                             // in the order first met
  std::vector<std::pair<std::string, std::string>> metadata;
};

// Inspects a loaded model; `path` is only echoed in the result.
InspectResult Inspect(const ir::Model& model, const std::string& path);
// Loads `path` (ir::LoadModel's errors) and inspects it.
Result<InspectResult> InspectFile(const std::string& path);

std::string FormatText(const InspectResult& r);
std::string FormatJson(const InspectResult& r);
std::string FormatMarkdown(const InspectResult& r);

}  // namespace ferry::ops

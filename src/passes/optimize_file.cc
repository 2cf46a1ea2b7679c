#include "passes/optimize_file.h"

#include <filesystem>

#include "ir/onnx_io.h"

namespace ferry::passes {

namespace {

void CountOps(const ir::Graph& g, std::map<std::string, int64_t>* h, int64_t* total) {
  for (const auto& n : g.nodes) {
    (*h)[n.domain.empty() ? n.op_type : n.domain + "." + n.op_type]++;
    ++*total;
    for (const auto& a : n.attributes) {
      if (a.g) CountOps(*a.g, h, total);
      for (const auto& sg : a.graphs) CountOps(*sg, h, total);
    }
  }
}

// kUsage when `output` names the file `input` (the rewrite would replace its own input).
Status CheckDistinct(const std::string& input, const std::string& output, const char* what) {
  std::error_code ec;
  if (std::filesystem::exists(output, ec) && std::filesystem::exists(input, ec) &&
      std::filesystem::equivalent(input, output, ec))
    return UsageError("-o {} is the input file; write the {} model elsewhere", output, what);
  return Status::Ok();
}

}  // namespace

Result<OptimizeFileResult> OptimizeFile(const OptimizeFileOptions& o) {
  if (o.check.count < 0) return UsageError("--check must be >= 0, got {}", o.check.count);
  FERRY_RETURN_IF_ERROR(CheckDistinct(o.input, o.output, "optimized"));
  FERRY_ASSIGN_OR_RETURN(auto original, ir::LoadModel(o.input));
  FERRY_ASSIGN_OR_RETURN(auto loaded, ir::LoadModel(o.input));
  ir::Model& model = *loaded;
  for (const auto& [name, dims] : o.fix_shapes)
    if (o.check.shapes.count(name))
      return UsageError(
          "--shape {0} and --fix-shape {0}: give one (a fixed shape is checked as "
          "fixed)",
          name);
  if (!o.check.data.empty() && o.check.count == 0)
    return UsageError("--check-data runs the check: drop --check 0");
  OptimizeFileResult r;
  r.input = o.input;
  r.output = o.output;
  r.check = o.check;
  for (const auto& [name, dims] : o.fix_shapes) {
    FERRY_RETURN_IF_ERROR(FixInputShape(model, name, dims));
    r.check.shapes[name] = dims;
  }
  CountOps(model.graph, &r.ops_before, &r.nodes_before);
  FERRY_ASSIGN_OR_RETURN(r.passes, Optimize(model, o.passes));
  CountOps(model.graph, &r.ops_after, &r.nodes_after);
  std::string sequence;
  for (const auto& p : r.passes)
    if (p.changes) sequence += (sequence.empty() ? "" : ",") + p.name;
  if (r.check.count > 0) {
    FERRY_ASSIGN_OR_RETURN(r.check_result, CheckEquivalent(*original, model, r.check));
    if (!r.check_result.ok)
      return Status(
          StatusCode::kCheckFailed,
          fmt::format("the optimized model differs from {}: {} (passes that changed the "
                      "graph: {}); nothing written",
                      o.input, r.check_result.first_failure, sequence.empty() ? "none" : sequence));
  }
  FERRY_RETURN_IF_ERROR(ir::SaveModel(model, o.output));
  return r;
}

Result<ConvertFileResult> ConvertFile(const ConvertFileOptions& o) {
  if ((o.opset > 0) == o.fp16) return UsageError("give exactly one of --opset N and --fp16");
  if (o.check.count < 0) return UsageError("--check must be >= 0, got {}", o.check.count);
  FERRY_RETURN_IF_ERROR(CheckDistinct(o.input, o.output, "converted"));
  FERRY_ASSIGN_OR_RETURN(auto original, ir::LoadModel(o.input));
  FERRY_ASSIGN_OR_RETURN(auto loaded, ir::LoadModel(o.input));
  ir::Model& model = *loaded;
  if (!o.check.data.empty() && o.check.count == 0)
    return UsageError("--check-data runs the check: drop --check 0");
  ConvertFileResult r;
  r.input = o.input;
  r.output = o.output;
  r.fp16 = o.fp16;
  if (o.opset > 0) {
    r.opset_from = model.OpsetFor("").value_or(0);
    r.opset_to = o.opset;
    FERRY_RETURN_IF_ERROR(ConvertOpset(model, o.opset));
  } else {
    FERRY_ASSIGN_OR_RETURN(r.fp16_report, ConvertToFloat16(model, o.fp16_options));
  }
  if (o.check.count > 0) {
    auto res = CheckEquivalent(*original, model, o.check);
    if (!res.ok()) return res.status().With("checking the converted model");
    r.checked = true;
    r.check_result = std::move(res).value();
    for (const auto& s : r.check_result.outputs)
      if (s.candidate_nonfinite > 0)
        return Status(StatusCode::kCheckFailed,
                      fmt::format("the converted model produces {} NaN/Inf value(s) in output '{}' "
                                  "where the original is finite; nothing written",
                                  s.candidate_nonfinite, s.name));
    if (o.opset > 0 && !r.check_result.ok)
      return Status(StatusCode::kCheckFailed,
                    fmt::format("the converted model differs from {}: {}; nothing written", o.input,
                                r.check_result.first_failure));
  }
  FERRY_RETURN_IF_ERROR(ir::SaveModel(model, o.output));
  std::error_code ec;
  r.bytes_in = std::filesystem::file_size(o.input, ec);
  r.bytes_out = std::filesystem::file_size(o.output, ec);
  return r;
}

}  // namespace ferry::passes

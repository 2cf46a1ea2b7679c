// ferry convert IN -o OUT (--opset N | --fp16 [--keep-fp32 OPTYPES_OR_NODES] [--keep-io-types])
//               [--check N] [--json]
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/command.h"
#include "ir/onnx_io.h"
#include "passes/check.h"
#include "passes/convert.h"

namespace ferry::cli {

namespace {

struct Options {
  std::string input, output;
  int64_t opset = 0;
  bool fp16 = false, keep_io = false, json = false;
  std::vector<std::string> keep_fp32;
  int check = 3;
};

int RunConvert(const Options& o) {
  if ((o.opset > 0) == o.fp16)
    return ReportError(UsageError("give exactly one of --opset N and --fp16"));
  if (o.check < 0) return ReportError(UsageError("--check must be >= 0, got {}", o.check));
  if (std::filesystem::exists(o.output) && std::filesystem::equivalent(o.input, o.output))
    return ReportError(
        UsageError("-o {} is the input file; write the converted model elsewhere", o.output));
  auto original = ir::LoadModel(o.input);
  if (!original.ok()) return ReportError(original.status());
  auto loaded = ir::LoadModel(o.input);
  if (!loaded.ok()) return ReportError(loaded.status());
  ir::Model& model = *loaded.value();
  nlohmann::json j;
  j["input"] = o.input;
  j["output"] = o.output;
  passes::CheckOptions check;
  check.count = o.check;
  if (o.opset > 0) {
    j["opset_from"] = model.OpsetFor("").value_or(0);
    j["opset_to"] = o.opset;
    Status st = passes::ConvertOpset(model, o.opset);
    if (!st.ok()) return ReportError(st);
  } else {
    passes::Fp16Options fo;
    fo.keep_io_types = o.keep_io;
    for (const auto& k : SplitCommaList(o.keep_fp32)) fo.keep_fp32.insert(k);
    auto rep = passes::ConvertToFloat16(model, fo);
    if (!rep.ok()) return ReportError(rep.status());
    j["clamped_initializers"] = rep->clamped;
    j["converted_initializers"] = rep->converted_initializers;
    j["casts_inserted"] = rep->casts_inserted;
    j["fp32_nodes"] = rep->fp32_nodes;
    for (const auto& c : rep->clamped)
      std::fprintf(stderr,
                   "ferry: warning: initializer '%s' has values beyond float16's range; clamped to "
                   "+-65504\n",
                   c.c_str());
  }
  if (o.check > 0) {
    auto res = passes::CheckEquivalent(*original.value(), model, check);
    if (!res.ok()) return ReportError(res.status().With("checking the converted model"));
    nlohmann::json jo = nlohmann::json::array();
    for (const auto& s : res->outputs) {
      nlohmann::json e = {{"name", s.name},
                          {"max_abs", s.max_abs},
                          {"cosine", s.cosine},
                          {"nonfinite", s.candidate_nonfinite}};
      if (s.top1_total)
        e["top1_agreement"] = static_cast<double>(s.top1_agree) / static_cast<double>(s.top1_total);
      jo.push_back(e);
    }
    j["check"] = {{"inputs", o.check}, {"outputs", jo}};
    for (const auto& s : res->outputs)
      if (s.candidate_nonfinite > 0)
        return ReportError(Status(
            StatusCode::kCheckFailed,
            fmt::format("the converted model produces {} NaN/Inf value(s) in output '{}' where "
                        "the original is finite; nothing written",
                        s.candidate_nonfinite, s.name)));
    if (o.opset > 0 && !res->ok)
      return ReportError(
          Status(StatusCode::kCheckFailed,
                 fmt::format("the converted model differs from {}: {}; nothing written", o.input,
                             res->first_failure)));
  }
  Status st = ir::SaveModel(model, o.output);
  if (!st.ok()) return ReportError(st);
  j["bytes_in"] = std::filesystem::file_size(o.input);
  j["bytes_out"] = std::filesystem::file_size(o.output);
  if (o.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  if (o.opset > 0)
    fmt::print("opset {} -> {}\n", j["opset_from"].get<int64_t>(), o.opset);
  else
    fmt::print("float16: {} initializers converted, {} casts inserted, {} nodes kept in float32\n",
               j["converted_initializers"].get<int64_t>(), j["casts_inserted"].get<int64_t>(),
               j["fp32_nodes"].get<int64_t>());
  if (j.contains("check"))
    for (const auto& e : j["check"]["outputs"])
      fmt::print("check {}: max abs {:.3g}, cosine {:.6f}{}\n", e["name"].get<std::string>(),
                 e["max_abs"].get<double>(), e["cosine"].get<double>(),
                 e.contains("top1_agreement") ? fmt::format(", top-1 agreement {:.1f}%",
                                                            100 * e["top1_agreement"].get<double>())
                                              : "");
  fmt::print("wrote {} ({} -> {} bytes)\n", o.output, j["bytes_in"].get<uint64_t>(),
             j["bytes_out"].get<uint64_t>());
  return 0;
}

}  // namespace

void SetupConvert(CLI::App& sub, Action* action) {
  auto o = std::make_shared<Options>();
  sub.add_option("model", o->input, "ONNX model to convert")->required();
  sub.add_option("-o,--output", o->output, "Where to write the converted model")->required();
  sub.add_option("--opset", o->opset,
                 "Target opset of the default domain (libonnx's version converter)");
  sub.add_flag("--fp16", o->fp16, "Weights and compute in float16, Casts at the boundaries");
  sub.add_option("--keep-fp32", o->keep_fp32,
                 "With --fp16: op types or node names kept in float32 (comma-separated)");
  sub.add_flag("--keep-io-types", o->keep_io, "With --fp16: graph inputs and outputs stay float32");
  sub.add_option("--check", o->check,
                 "Run original and converted on N seeded inputs before writing (default 3; 0 = "
                 "off): --opset must "
                 "match within rtol 1e-5 / atol 1e-6, --fp16 must not produce NaN/Inf");
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.callback([o, action] { *action = [o] { return RunConvert(*o); }; });
}

}  // namespace ferry::cli

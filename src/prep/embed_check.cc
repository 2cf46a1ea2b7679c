// `ferry prep embed --check` and the renderers (prep/embed.h): decoded images through the
// embedded model against spec-then-model, under Ferry's runtime and under ONNX Runtime.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "ir/onnx_io.h"
#include "prep/check.h"
#include "prep/embed.h"
#include "prep/image.h"
#include "prep/pipeline.h"
#include "prep/subprocess.h"
#include "runtime/session.h"

namespace ferry::prep {

namespace fs = std::filesystem;

namespace {

// The decoded image as the embedded model takes it: uint8 [1,] H, W, 3 (a gray image
// replicated, as the pipeline does for rgb / bgr).
Tensor RawTensor(const Image& img, bool batch) {
  Shape shape = {img.height, img.width, 3};
  if (batch) shape.insert(shape.begin(), 1);
  Tensor t(DType::kUint8, shape);
  uint8_t* d = t.data<uint8_t>();
  const int64_t n = img.height * img.width;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < 3; ++c)
      d[i * 3 + c] =
          img.pixels[static_cast<size_t>(i * img.channels + (img.channels == 3 ? c : 0))];
  return t;
}

// One image's comparison folded into its row (the maximum over images).
void Fold(EmbedCheckRow* row, const Tensor& got, const Tensor& want) {
  TensorCheck tc;
  CompareTensors(got, want, &tc);
  row->max_abs_diff = std::max(row->max_abs_diff, tc.max_abs);
  row->differing += tc.differing;
  row->elements += tc.total;
  row->ok = row->ok && tc.note.empty();
}

}  // namespace

Result<EmbedCheckResult> CheckEmbedded(const ir::Model& original, const ir::Model& embedded,
                                       const Spec& spec, const EmbedCheckOptions& o) {
  if (o.images.empty()) return UsageError("--check needs images (--images DIR|FILE...)");
  // Per image: the raw tensors (embedded model) and the spec's tensors (original model).
  std::vector<std::vector<std::pair<std::string, Value>>> raw_feeds, spec_feeds;
  for (const auto& path : o.images) {
    FERRY_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
    std::vector<std::pair<std::string, Value>> raw, ref;
    for (const auto& in : spec.inputs) {
      DecodeOptions d;
      d.apply_exif = false;
      d.max_pixels = in.image.max_pixels;
      FERRY_ASSIGN_OR_RETURN(Image img, DecodeImage(bytes, d, path));
      raw.emplace_back(in.name, Value(RawTensor(img, in.image.batch)));
      FERRY_ASSIGN_OR_RETURN(Tensor t, PreprocessImage(in.image, img, path));
      ref.emplace_back(in.name, Value(std::move(t)));
    }
    raw_feeds.push_back(std::move(raw));
    spec_feeds.push_back(std::move(ref));
  }
  const size_t n_model_outputs = original.graph.outputs.size();
  EmbedCheckResult result;
  result.images = o.images.size();
  // Rows: per runtime, each model output, then each prep output.
  auto make_rows = [&](const std::string& runtime) {
    std::vector<EmbedCheckRow> rows;
    for (const auto& out : embedded.graph.outputs) {
      EmbedCheckRow r;
      r.runtime = runtime;
      r.tensor = out.name;
      rows.push_back(r);
    }
    return rows;
  };
  auto judge = [&](std::vector<EmbedCheckRow>& rows, const std::vector<std::vector<Tensor>>& emb,
                   const std::vector<std::vector<Tensor>>& ref) {
    for (size_t k = 0; k < emb.size(); ++k) {
      for (size_t j = 0; j < rows.size(); ++j) {
        const bool prep_out = j >= n_model_outputs;
        const Tensor& want =
            prep_out ? spec_feeds[k][j - n_model_outputs].second.tensor() : ref[k][j];
        Fold(&rows[j], emb[k][j], want);
        double peak = 0;
        for (int64_t i = 0; i < want.size(); ++i)
          peak = std::max(peak, std::fabs(want.GetAsDouble(i)));
        // The prepended steps are all exact; the model outputs within atol + rtol * peak.
        rows[j].tolerance = prep_out ? 0.0 : std::max(rows[j].tolerance, o.atol + o.rtol * peak);
      }
    }
    for (auto& r : rows) {
      r.ok = r.ok && r.max_abs_diff <= r.tolerance;
      result.ok = result.ok && r.ok;
      result.rows.push_back(r);
    }
  };
  // Ferry.
  {
    FERRY_ASSIGN_OR_RETURN(auto o_copy, ir::ParseModel(ir::SerializeModel(original), "", "model"));
    FERRY_ASSIGN_OR_RETURN(auto e_copy,
                           ir::ParseModel(ir::SerializeModel(embedded), "", "embedded model"));
    FERRY_ASSIGN_OR_RETURN(
        auto s_orig, runtime::Session::Create(std::shared_ptr<const ir::Model>(std::move(o_copy))));
    FERRY_ASSIGN_OR_RETURN(
        auto s_emb, runtime::Session::Create(std::shared_ptr<const ir::Model>(std::move(e_copy))));
    std::vector<std::vector<Tensor>> emb, ref;
    for (size_t k = 0; k < o.images.size(); ++k) {
      FERRY_ASSIGN_OR_RETURN(auto a, s_emb->Run(raw_feeds[k]));
      FERRY_ASSIGN_OR_RETURN(auto b, s_orig->Run(spec_feeds[k]));
      std::vector<Tensor> ea, rb;
      for (auto& v : a) ea.push_back(v.tensor());
      for (auto& v : b) rb.push_back(v.tensor());
      emb.push_back(std::move(ea));
      ref.push_back(std::move(rb));
    }
    auto rows = make_rows("ferry");
    judge(rows, emb, ref);
  }
  // ONNX Runtime, in the venv: tools/prep_embed_ort.py reads the models and .npy feeds.
  {
    std::error_code ec;
    if (o.python.empty() || !fs::exists(o.python, ec))
      return UsageError("python '{}' not found (--python; the project venv: scripts/install-deps)",
                        o.python);
    if (o.script.empty() || !fs::is_regular_file(o.script, ec))
      return UsageError("script '{}' not found", o.script);
    TempDir tmp("ferry-embed-");
    if (tmp.path.empty()) return InvalidError("cannot create a temporary folder");
    const fs::path dir(tmp.path);
    FERRY_RETURN_IF_ERROR(ir::SaveModel(original, (dir / "original.onnx").string()));
    FERRY_RETURN_IF_ERROR(ir::SaveModel(embedded, (dir / "embedded.onnx").string()));
    for (size_t k = 0; k < o.images.size(); ++k) {
      fs::path d = dir / std::to_string(k);
      fs::create_directories(d, ec);
      for (size_t i = 0; i < spec.inputs.size(); ++i) {
        FERRY_RETURN_IF_ERROR(WriteFileAtomic((d / ("raw_" + std::to_string(i) + ".npy")).string(),
                                              SerializeNpy(raw_feeds[k][i].second.tensor())));
        FERRY_RETURN_IF_ERROR(WriteFileAtomic((d / ("spec_" + std::to_string(i) + ".npy")).string(),
                                              SerializeNpy(spec_feeds[k][i].second.tensor())));
      }
    }
    std::vector<std::string> argv = {o.python,  o.script,   "--dir",
                                     tmp.path,  "--images", std::to_string(o.images.size()),
                                     "--inputs"};
    for (const auto& in : spec.inputs) argv.push_back(in.name);
    int rc = RunProcess(argv);
    if (rc != 0)
      return InvalidError("ONNX Runtime ({} {}) failed with exit code {}", o.python, o.script, rc);
    std::vector<std::vector<Tensor>> emb, ref;
    for (size_t k = 0; k < o.images.size(); ++k) {
      fs::path d = dir / std::to_string(k);
      std::vector<Tensor> ea, rb;
      for (size_t j = 0; j < embedded.graph.outputs.size(); ++j) {
        FERRY_ASSIGN_OR_RETURN(Tensor t,
                               ReadNpy((d / ("emb_out_" + std::to_string(j) + ".npy")).string()));
        ea.push_back(std::move(t));
      }
      for (size_t j = 0; j < n_model_outputs; ++j) {
        FERRY_ASSIGN_OR_RETURN(Tensor t,
                               ReadNpy((d / ("ref_out_" + std::to_string(j) + ".npy")).string()));
        rb.push_back(std::move(t));
      }
      emb.push_back(std::move(ea));
      ref.push_back(std::move(rb));
    }
    auto rows = make_rows("onnxruntime");
    judge(rows, emb, ref);
  }
  return result;
}

std::string FormatEmbedText(const EmbedResult& r, const EmbedCheckResult* check,
                            const std::string& out_path) {
  std::string s;
  for (const auto& in : r.inputs) {
    s += fmt::format("{}:\n", in.name);
    for (const auto& step : in.steps) s += "  " + step + "\n";
  }
  if (check) {
    s += fmt::format("check on {} image(s), embedded model vs spec then model:\n", check->images);
    for (const auto& row : check->rows)
      s += fmt::format(
          "  {:<5} {:<11} {}: max abs diff {:.3g} (tolerance {:.3g}), {} of {} "
          "elements differ\n",
          row.ok ? "ok" : "FAIL", row.runtime, row.tensor, row.max_abs_diff, row.tolerance,
          row.differing, row.elements);
  }
  if (check && !check->ok)
    s += "prep embed: check failed, nothing written\n";
  else
    s += fmt::format("prep embed: wrote {} (opset {})\n", out_path, r.opset);
  return s;
}

std::string FormatEmbedJson(const EmbedResult& r, const EmbedCheckResult* check,
                            const std::string& out_path) {
  nlohmann::json j;
  j["inputs"] = nlohmann::json::array();
  for (const auto& in : r.inputs)
    j["inputs"].push_back({{"name", in.name}, {"dims", in.dims}, {"steps", in.steps}});
  j["opset"] = r.opset;
  const bool ok = !check || check->ok;
  j["written"] = ok ? nlohmann::json(out_path) : nlohmann::json(nullptr);
  if (check) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : check->rows)
      rows.push_back({{"runtime", row.runtime},
                      {"tensor", row.tensor},
                      {"max_abs_diff", row.max_abs_diff},
                      {"tolerance", row.tolerance},
                      {"differing", row.differing},
                      {"elements", row.elements},
                      {"ok", row.ok}});
    j["check"] = {{"images", check->images}, {"ok", check->ok}, {"rows", rows}};
  }
  j["ok"] = ok;
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace ferry::prep

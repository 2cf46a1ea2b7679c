// `ferry prep check` (prep/check.h): run both sides, compare per tensor.
#include "prep/check.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "prep/pipeline.h"
#include "prep/subprocess.h"

namespace ferry::prep {

namespace fs = std::filesystem;

namespace {

bool IsImageName(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

}  // namespace

Result<std::vector<std::string>> ExpandImages(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    std::error_code ec;
    if (fs::is_directory(item, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(item, ec))
        if (e.is_regular_file() && IsImageName(e.path())) found.push_back(e.path().string());
      std::sort(found.begin(), found.end());
      if (found.empty()) return InvalidError("'{}': no .png, .jpg or .jpeg files", item);
      out.insert(out.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(item, ec)) {
      out.push_back(item);
    } else {
      return InvalidError("'{}': no such file or folder", item);
    }
  }
  if (out.empty()) return InvalidError("no images given");
  return out;
}

void ToleranceFor(const ImageSpec& spec, double* max_abs, double* min_exact_share) {
  const bool exact = !spec.resize || spec.resize->filter == Filter::kPilNearest ||
                     spec.resize->filter == Filter::kCv2Nearest ||
                     spec.resize->filter == Filter::kCv2NearestExact;
  if (exact) {
    *max_abs = 0;
    *min_exact_share = 1;
    return;
  }
  if (spec.resize->float_tensor) {
    // torchvision's float-tensor path: no rounding to 8 bits anywhere, so the bar is 1e-5 in
    // the output's units; float sums whose order torch's compiled loop chose differently may
    // differ in the last bits, so no share of exact elements is required.
    *max_abs = 1e-5;
    *min_exact_share = 0;
    return;
  }
  double step = 1;  // one 8-bit step in the output's units
  if (spec.dtype == DType::kFloat) {
    step = 0;
    size_t n = std::max<size_t>(1, spec.std.size());
    for (size_t c = 0; c < n; ++c) {
      double sd = spec.std.empty() ? 1.0 : spec.std[c];
      step = std::max(step, std::fabs(spec.scale / sd));
    }
    step = step * (1 + 1e-5) + 1e-6;  // float32 rounding of the two neighbours
  }
  *max_abs = step;
  *min_exact_share = 0.999;
}

void CompareTensors(const Tensor& ours, const Tensor& ref, TensorCheck* out) {
  out->shape = ours.shape();
  out->total = ours.size();
  out->max_abs = 0;
  out->differing = 0;
  if (ours.shape() != ref.shape() || ours.dtype() != ref.dtype()) {
    out->note = fmt::format("reference gives {} {}, Ferry {} {}", DTypeName(ref.dtype()),
                            ShapeToString(ref.shape()), DTypeName(ours.dtype()),
                            ShapeToString(ours.shape()));
    out->differing = out->total;
    out->max_abs = INFINITY;
    return;
  }
  for (int64_t i = 0; i < ours.size(); ++i) {
    double a = ours.GetAsDouble(i), b = ref.GetAsDouble(i);
    if (a != b) {
      ++out->differing;
      out->max_abs = std::max(out->max_abs, std::fabs(a - b));
    }
  }
}

Result<CheckResult> Check(const CheckOptions& o) {
  FERRY_ASSIGN_OR_RETURN(Spec spec, LoadSpec(o.spec_path));
  for (const auto& in : spec.inputs)
    if (in.is_table())
      return InvalidError(
          "prep check compares image inputs with Pillow / OpenCV; input '{}' is a table (no "
          "reference library: tests/prep/test_table.py checks tables against NumPy)",
          in.name);
  for (const auto& in : spec.inputs) {
    if (in.is_table() || in.is_text()) continue;
    const ImageSpec& s = in.image;
    const char* key = s.resize && s.resize->line_height ? "resize.height"
                      : s.resize && (s.resize->min_side || s.resize->max_side)
                          ? "resize.min_side / max_side"
                      : s.resize && s.resize->top_left   ? "resize.fit: letterbox_top_left"
                      : s.resize && s.resize->pad_square ? "resize.fit: pad_to_square"
                      : s.pad_height                     ? "pad"
                      : s.divide > 0                     ? "scale.divide"
                      : s.normalize_f64                  ? "normalize_dtype"
                      : s.gray_after_resize              ? "gray: after_resize"
                                                         : nullptr;
    if (key)
      return UnsupportedError(
          "prep check: input '{}' uses image.{}, which the reference script does not reproduce "
          "(tests/prep/test_real_specs.py checks it against the packages' own code)",
          in.name, key);
  }
  const bool text = !spec.inputs.empty() && spec.inputs[0].is_text();
  std::vector<std::string> images;
  if (text) {  // text files as given: one example per line, or JSON Lines
    for (const auto& f : o.images) {
      std::error_code fec;
      if (!fs::is_regular_file(f, fec)) return InvalidError("'{}': no such file", f);
      images.push_back(f);
    }
    if (images.empty()) return InvalidError("no text files given");
  } else {
    FERRY_ASSIGN_OR_RETURN(images, ExpandImages(o.images));
  }
  FERRY_ASSIGN_OR_RETURN(std::vector<NamedTensor> ours, PreprocessFiles(spec, images));
  const std::string& script = text ? o.text_script : o.script;
  std::error_code ec;
  if (o.python.empty() || !fs::exists(o.python, ec))
    return UsageError(
        "reference python '{}' not found (--python; the project venv: "
        "scripts/install-deps)",
        o.python);
  if (script.empty() || !fs::is_regular_file(script, ec))
    return UsageError("reference script '{}' not found (--reference-script)", script);
  TempDir tmp("ferry-prep-");
  if (tmp.path.empty()) return InvalidError("cannot create a temporary folder");
  const std::string spec_json = (fs::path(tmp.path) / "spec.json").string();
  FERRY_RETURN_IF_ERROR(WriteFileAtomic(spec_json, SpecToJson(spec)));
  std::vector<std::string> argv = {o.python, script, "--spec", spec_json, "--out", tmp.path};
  argv.insert(argv.end(), images.begin(), images.end());
  int rc = RunProcess(argv);
  if (rc != 0)
    return InvalidError("the reference ({} {}) failed with exit code {}", o.python, script, rc);
  nlohmann::json info;
  {
    FERRY_ASSIGN_OR_RETURN(std::string text,
                           ReadFileBytes((fs::path(tmp.path) / "reference.json").string()));
    info = nlohmann::json::parse(text, nullptr, false);
    if (info.is_discarded())
      return InvalidError("the reference wrote an unreadable reference.json");
  }
  CheckResult result;
  result.images = images;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const InputSpec& in = spec.inputs[i];
    TensorCheck tc;
    tc.input = in.name;
    tc.reference = info.value(in.name, std::string("?"));
    std::string file = in.name;
    for (char& ch : file)
      if (ch == '/' || ch == ':') ch = '_';
    FERRY_ASSIGN_OR_RETURN(Tensor ref, ReadNpy((fs::path(tmp.path) / (file + ".npy")).string()));
    CompareTensors(ours[i].tensor, ref, &tc);
    if (in.is_text()) {  // token ids, masks and type ids: exact
      tc.tolerance = 0;
      tc.min_exact_share = 1;
    } else {
      ToleranceFor(in.image, &tc.tolerance, &tc.min_exact_share);
    }
    double exact_share =
        tc.total ? 1.0 - static_cast<double>(tc.differing) / static_cast<double>(tc.total) : 1.0;
    tc.ok = tc.note.empty() && tc.max_abs <= tc.tolerance && exact_share >= tc.min_exact_share;
    result.ok = result.ok && tc.ok;
    result.tensors.push_back(std::move(tc));
  }
  return result;
}

std::string FormatCheckText(const CheckResult& r) {
  std::string s = fmt::format("{} file(s)\n", r.images.size());
  for (const auto& t : r.tensors) {
    double share = t.total ? 100.0 * static_cast<double>(t.differing) / t.total : 0.0;
    s += fmt::format("{:<6} {} {} vs {}: max abs diff {:.6g}, {} of {} elements differ ({:.4f}%)",
                     t.ok ? "ok" : "FAIL", t.input, ShapeToString(t.shape), t.reference, t.max_abs,
                     t.differing, t.total, share);
    if (t.tolerance == 0)
      s += " (bar: exact)";
    else
      s += fmt::format(" (bar: <= {:.6g}, >= {:.1f}% exact)", t.tolerance,
                       100.0 * t.min_exact_share);
    if (!t.note.empty()) s += ": " + t.note;
    s += "\n";
  }
  s += r.ok ? "prep check: ok\n" : "prep check: FAILED\n";
  return s;
}

std::string FormatCheckJson(const CheckResult& r) {
  nlohmann::json j;
  j["ok"] = r.ok;
  j["images"] = r.images;
  j["tensors"] = nlohmann::json::array();
  for (const auto& t : r.tensors) {
    j["tensors"].push_back({{"input", t.input},
                            {"reference", t.reference},
                            {"shape", t.shape},
                            {"max_abs_diff", std::isfinite(t.max_abs) ? t.max_abs : -1.0},
                            {"differing", t.differing},
                            {"total", t.total},
                            {"tolerance", t.tolerance},
                            {"min_exact_share", t.min_exact_share},
                            {"ok", t.ok},
                            {"note", t.note}});
  }
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace ferry::prep

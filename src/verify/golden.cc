#include "verify/golden.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

#include "core/npy.h"
#include "ir/onnx_io.h"
#include "ir/queries.h"

namespace ferry::verify {

namespace fs = std::filesystem;

// ---- capture ----

namespace {

std::string InputNames(const std::vector<const ir::ValueInfo*>& v) {
  std::string s;
  for (const auto* vi : v) s += (s.empty() ? "" : ", ") + vi->name;
  return s;
}

bool LooksLikeMask(const std::string& name) {
  std::string s = name;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s.find("mask") != std::string::npos;
}

}  // namespace

Result<CapturePlan> PlanCapture(const ir::Graph& g, const CaptureOptions& o) {
  CapturePlan plan;
  std::vector<const ir::ValueInfo*> real = g.RealInputs();
  auto known = [&](const std::string& n) {
    return std::any_of(real.begin(), real.end(), [&](auto* vi) { return vi->name == n; });
  };
  for (const auto& [n, s] : o.shapes)
    if (!known(n))
      return UsageError("--shape names '{}', which is not a model input (inputs: {})", n,
                        InputNames(real));
  for (const auto& [n, r] : o.ranges) {
    if (!known(n))
      return UsageError("--range names '{}', which is not a model input (inputs: {})", n,
                        InputNames(real));
    if (!(r.first <= r.second))
      return UsageError("--range {}: LO {} is greater than HI {}", n, r.first, r.second);
  }
  // Inputs with --shape first: they fix the symbols they use.
  for (const auto* vi : real) {
    if (vi->type.kind != ir::TypeInfo::Kind::kTensor)
      return UnsupportedError("input '{}' is {}: golden capture generates tensors only", vi->name,
                              vi->type.ToString());
    DType dt = vi->type.elem_type;
    if (dt == DType::kString || dt == DType::kUndefined)
      return UnsupportedError("input '{}' has dtype {}: golden capture generates numeric data",
                              vi->name, DTypeName(dt));
    InputPlan ip;
    ip.name = vi->name;
    ip.dtype = dt;
    auto it = o.shapes.find(vi->name);
    if (it != o.shapes.end()) {
      const Shape& s = it->second;
      if (vi->type.shape && vi->type.shape->size() != s.size())
        return UsageError("--shape {}: {} dims given, the model declares {} ({})", vi->name,
                          s.size(), vi->type.shape->size(), vi->type.ToString());
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] < 0) return UsageError("--shape {}: dim {} is negative", vi->name, s[i]);
        if (vi->type.shape) {
          const ir::Dim& d = (*vi->type.shape)[i];
          if (d.value && *d.value != s[i])
            return UsageError("--shape {}: dim {} is {}, the model declares {}", vi->name, i, s[i],
                              *d.value);
          if (!d.value && !d.symbol.empty()) {
            auto [si, ins] = plan.symbols.emplace(d.symbol, s[i]);
            if (!ins && si->second != s[i])
              return UsageError("--shape gives symbolic dim '{}' two values ({} and {})", d.symbol,
                                si->second, s[i]);
          }
        }
        ir::Dim fixed;
        fixed.value = s[i];
        ip.dims.push_back(fixed);
      }
    } else {
      if (!vi->type.shape)
        return InvalidError("input '{}' has no declared shape; give --shape {}=DIMS", vi->name,
                            vi->name);
      ip.dims = *vi->type.shape;
      for (size_t i = 0; i < ip.dims.size(); ++i)
        if (!ip.dims[i].value && ip.dims[i].symbol.empty())
          ip.dims[i].symbol = fmt::format("{}:{}", vi->name, i);  // unnamed dim: its own symbol
    }
    plan.inputs.push_back(std::move(ip));
  }
  // Remaining symbols: a leading one is the batch (1), others get the default.
  for (auto& ip : plan.inputs) {
    for (size_t i = 0; i < ip.dims.size(); ++i) {
      const ir::Dim& d = ip.dims[i];
      if (d.value || plan.symbols.count(d.symbol)) continue;
      if (i == 0) {
        plan.symbols[d.symbol] = 1;
        plan.notes.push_back(fmt::format(
            "input '{}': symbolic dim '{}' set to 1 (batch; use --shape {}=... to change)", ip.name,
            d.symbol, ip.name));
      } else {
        plan.symbols[d.symbol] = o.default_dim;
        plan.seq_symbols.push_back(d.symbol);
        plan.notes.push_back(
            fmt::format("input '{}': symbolic dim '{}' set to {} (use --shape {}=... to change)",
                        ip.name, d.symbol, o.default_dim, ip.name));
      }
    }
  }
  // Value ranges.
  for (auto& ip : plan.inputs) {
    auto r = o.ranges.find(ip.name);
    if (r != o.ranges.end()) {
      ip.has_range = true;
      ip.lo = r->second.first;
      ip.hi = r->second.second;
      if (IsInteger(ip.dtype)) {
        ip.lo = std::ceil(ip.lo);
        ip.hi = std::floor(ip.hi);
        if (ip.lo > ip.hi)
          return UsageError("--range {}: no integer in [{}, {}]", ip.name, r->second.first,
                            r->second.second);
      }
      continue;
    }
    if (IsFloat(ip.dtype)) continue;
    if (LooksLikeMask(ip.name)) {
      ip.mask = true;
      plan.notes.push_back(fmt::format("input '{}': looks like a mask, filled with ones", ip.name));
      continue;
    }
    if (ip.dtype == DType::kBool) continue;
    std::string table;
    int64_t rows = ir::EmbeddingRows(g, ip.name, &table);
    ip.has_range = true;
    ip.lo = 0;
    if (rows > 0) {
      ip.hi = static_cast<double>(rows - 1);
      plan.notes.push_back(
          fmt::format("input '{}': indices of Gather table '{}' ({} rows), drawn from [0, {}]",
                      ip.name, table, rows, rows - 1));
    } else {
      ip.hi = 9;
      plan.notes.push_back(fmt::format(
          "input '{}': integers drawn from [0, 9] (use --range {}=LO,HI)", ip.name, ip.name));
    }
  }
  return plan;
}

namespace {

class Rng {
 public:
  explicit Rng(uint64_t seed) : g_(seed) {}
  double Uniform() { return static_cast<double>(g_() >> 11) * 0x1.0p-53; }  // [0, 1)
  double Normal() {  // Box-Muller, one value per call (portable across standard libraries)
    double u1 = Uniform(), u2 = Uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
  int64_t Int(int64_t lo, int64_t hi) {  // [lo, hi]
    uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>(span == 0 ? g_() : g_() % span);
  }

 private:
  std::mt19937_64 g_;
};

Tensor Fill(DType dt, const Shape& shape, const std::function<double(int64_t)>& value) {
  Tensor t(dt, shape);
  VisitPod(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.size(); ++i) p[i] = T(static_cast<ComputeType<T>>(value(i)));
  });
  return t;
}

}  // namespace

GeneratedSet GenerateSet(const CapturePlan& plan, const CaptureOptions& o, int index,
                         const std::string& kind, int64_t seq_len) {
  GeneratedSet gs;
  gs.kind = kind;
  Rng rng(o.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(index) * 0xBF58476D1CE4E5B9ull +
          1);
  for (const auto& ip : plan.inputs) {
    Shape shape;
    for (const auto& d : ip.dims) {
      if (d.value) {
        shape.push_back(*d.value);
        continue;
      }
      bool seq = std::find(plan.seq_symbols.begin(), plan.seq_symbols.end(), d.symbol) !=
                 plan.seq_symbols.end();
      shape.push_back(seq && seq_len > 0 ? seq_len : plan.symbols.at(d.symbol));
    }
    DType dt = ip.dtype;
    double lo = ip.lo, hi = ip.hi;
    if (IsUnsignedInt(dt)) lo = std::max(lo, 0.0);
    auto clamp = [&](double v) { return ip.has_range ? std::clamp(v, lo, hi) : v; };
    std::function<double(int64_t)> value;
    if (ip.mask) {
      value = [](int64_t) { return 1.0; };
    } else if (kind == "zeros") {
      value = [&](int64_t) { return clamp(0.0); };
    } else if (kind == "large") {
      if (dt == DType::kBool)
        value = [](int64_t) { return 1.0; };
      else if (ip.has_range)
        value = [&](int64_t) { return hi; };
      else
        value = [&](int64_t) { return 1000.0 * rng.Normal(); };
    } else if (dt == DType::kBool) {
      value = [&](int64_t) { return rng.Uniform() < 0.5 ? 0.0 : 1.0; };
    } else if (IsInteger(dt)) {
      value = [&](int64_t) {
        return static_cast<double>(rng.Int(static_cast<int64_t>(lo), static_cast<int64_t>(hi)));
      };
    } else if (ip.has_range) {
      value = [&](int64_t) { return lo + (hi - lo) * rng.Uniform(); };
    } else {
      value = [&](int64_t) { return rng.Normal(); };
    }
    gs.inputs.emplace_back(ip.name, Value(Fill(dt, shape, value)));
  }
  return gs;
}

Status WriteGoldenDir(const std::string& dir, const std::vector<CapturedSet>& sets,
                      const std::string& manifest, bool force) {
  fs::path target = fs::path(dir);
  if (target.filename().empty()) target = target.parent_path();
  fs::path parent = target.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  bool exists = fs::exists(target, ec);
  if (exists && !force)
    return InvalidError("'{}' already exists (pass --force to replace it)", dir);
  if (exists && !fs::is_directory(target, ec))
    return InvalidError("'{}' exists and is not a folder", dir);
  fs::create_directories(parent, ec);
  std::string tmpl = (parent / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  if (!mkdtemp(tmpl.data()))
    return InvalidError("cannot create a temporary folder in '{}'", parent.string());
  struct Cleanup {
    std::string path;
    ~Cleanup() {
      std::error_code e;
      if (!path.empty()) fs::remove_all(path, e);
    }
  } cleanup{tmpl};
  for (size_t s = 0; s < sets.size(); ++s) {
    fs::path sd = fs::path(tmpl) / fmt::format("test_data_set_{}", s);
    if (!fs::create_directory(sd, ec)) return InvalidError("cannot create '{}'", sd.string());
    auto write = [&](const NamedValues& vals, const char* prefix) -> Status {
      for (size_t k = 0; k < vals.size(); ++k) {
        const auto& [name, v] = vals[k];
        if (!v.is_tensor())
          return UnsupportedError("'{}' is {}: golden data stores tensors only", name,
                                  v.is_sequence() ? "a sequence" : "empty");
        FERRY_RETURN_IF_ERROR(WriteFileAtomic((sd / fmt::format("{}{}.pb", prefix, k)).string(),
                                              ir::SerializeTensorProto(v.tensor(), name)));
      }
      return Status::Ok();
    };
    FERRY_RETURN_IF_ERROR(write(sets[s].inputs, "input_"));
    FERRY_RETURN_IF_ERROR(write(sets[s].outputs, "output_"));
  }
  FERRY_RETURN_IF_ERROR(WriteFileAtomic((fs::path(tmpl) / "golden.json").string(), manifest));
  if (exists) {
    std::string old = tmpl + ".old";
    fs::rename(target, old, ec);
    if (ec) return InvalidError("cannot move the existing '{}' aside: {}", dir, ec.message());
    fs::rename(tmpl, target, ec);
    if (ec) {
      std::error_code e2;
      fs::rename(old, target, e2);
      return InvalidError("cannot rename '{}' to '{}': {}", tmpl, dir, ec.message());
    }
    fs::remove_all(old, ec);
  } else {
    fs::rename(tmpl, target, ec);
    if (ec) return InvalidError("cannot rename '{}' to '{}': {}", tmpl, dir, ec.message());
  }
  cleanup.path.clear();
  return Status::Ok();
}

}  // namespace ferry::verify

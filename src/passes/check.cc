#include "passes/check.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <type_traits>

#include "core/dtype.h"
#include "core/half.h"
#include "core/memory_budget.h"

#include "ir/data_sets.h"
#include "ir/queries.h"
#include "passes/seed_dims.h"
#include "runtime/session.h"

namespace ferry::passes {

namespace {

// Upper bound for integer inputs: an embedding table's row count when the input feeds a
// Gather, else 10.
int64_t IdLimit(const ir::Graph& g, const std::string& input) {
  int64_t rows = ir::EmbeddingRows(g, input);
  return rows > 0 ? rows : 10;
}

using Feeds = std::vector<std::pair<std::string, Value>>;

// One seeded set for every real input, of the dims in `shapes`.
Result<Feeds> MakeInputs(const ir::Model& m, const std::map<std::string, Shape>& shapes,
                         uint64_t seed) {
  std::mt19937_64 rng(seed);
  Feeds feeds;
  for (const ir::ValueInfo* vi : m.graph.RealInputs()) {
    auto it = shapes.find(vi->name);
    if (vi->type.kind != ir::TypeInfo::Kind::kTensor || it == shapes.end())
      return UnsupportedError(
          "input '{}' has type {}: the check needs tensor inputs of known rank (give "
          "--check-data DIR)",
          vi->name, vi->type.ToString());
    // The sessions it feeds refuse more than the memory budget; so does the feed itself.
    const int64_t elems = NumElements(it->second);
    const uint64_t esize = std::max<uint64_t>(DTypeSize(vi->type.elem_type), 1);
    const bool overflow = elems == std::numeric_limits<int64_t>::max() ||
                          static_cast<uint64_t>(elems) > UINT64_MAX / esize;
    const uint64_t bytes = overflow ? 0 : static_cast<uint64_t>(elems) * esize;
    if (overflow || bytes > DefaultMaxMemory())
      return InvalidError(
          "input '{}' of shape {} would take {} bytes, over the memory budget of {} bytes (give "
          "--shape or --max-memory)",
          vi->name, ShapeToString(it->second), overflow ? "more than 2^63" : std::to_string(bytes),
          DefaultMaxMemory());
    Tensor t(vi->type.elem_type, it->second);
    const DType dt = vi->type.elem_type;
    std::normal_distribution<float> normal(0.f, 1.f);
    if (dt == DType::kFloat) {
      for (auto& v : t.span<float>()) v = normal(rng);
    } else if (dt == DType::kDouble) {
      for (auto& v : t.span<double>()) v = normal(rng);
    } else if (dt == DType::kInt64 || dt == DType::kInt32) {
      std::uniform_int_distribution<int64_t> ids(
          0, std::max<int64_t>(IdLimit(m.graph, vi->name) - 1, 0));
      for (int64_t k = 0; k < t.size(); ++k) {
        int64_t v = ids(rng);
        if (dt == DType::kInt64)
          t.data<int64_t>()[k] = v;
        else
          t.data<int32_t>()[k] = static_cast<int32_t>(v);
      }
    } else if (dt == DType::kBool) {
      for (int64_t k = 0; k < t.size(); ++k) t.data<bool>()[k] = (rng() & 1) != 0;
    } else {
      return UnsupportedError(
          "input '{}' has dtype {}: the check generates float, int32/64 and bool inputs (give "
          "--check-data DIR)",
          vi->name, DTypeName(dt));
    }
    feeds.emplace_back(vi->name, Value(std::move(t)));
  }
  return feeds;
}

// "x float32[1,3,1,1] for float32[?,3,?,?]" per input with a dynamic dim ("" when none).
std::string DescribeSeeded(const ir::Model& m, const std::map<std::string, Shape>& shapes) {
  std::string s;
  for (const ir::ValueInfo* vi : m.graph.RealInputs()) {
    auto it = shapes.find(vi->name);
    if (it == shapes.end() || !vi->type.shape) continue;
    bool dynamic = false;
    for (const auto& d : *vi->type.shape) dynamic = dynamic || !d.value || *d.value < 0;
    if (!dynamic) continue;
    s += fmt::format("{}{} {}{} for {}", s.empty() ? "" : ", ", vi->name,
                     DTypeName(vi->type.elem_type), ShapeToString(it->second), vi->type.ToString());
  }
  return s;
}

// `t` converted to `to` (float types only), or `t` itself.
Tensor ConvertFloat(const Tensor& t, DType to) {
  if (t.dtype() == to || !IsFloat(t.dtype()) || !IsFloat(to)) return t;
  Tensor out(to, t.shape());
  for (int64_t i = 0; i < t.size(); ++i) {
    double v = t.GetAsDouble(i);
    (void)VisitDType(to, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
        out.data<T>()[i] = T(static_cast<float>(v));
      else if constexpr (std::is_floating_point_v<T>)
        out.data<T>()[i] = static_cast<T>(v);
    });
  }
  return out;
}

// Accumulates statistics of one output of one set.
void Accumulate(const Tensor& a, const Tensor& b, OutputStats* st, double* dot, double* na,
                double* nb) {
  for (int64_t i = 0; i < a.size(); ++i) {
    double x = a.GetAsDouble(i), y = b.GetAsDouble(i);
    if (std::isfinite(x) && !std::isfinite(y)) st->candidate_nonfinite++;
    if (!std::isfinite(x) || !std::isfinite(y)) continue;
    st->max_abs = std::max(st->max_abs, std::fabs(x - y));
    *dot += x * y;
    *na += x * x;
    *nb += y * y;
  }
  if (a.rank() == 2 && a.dim(1) > 1 && IsFloat(a.dtype())) {
    for (int64_t r = 0; r < a.dim(0); ++r) {
      int64_t ba = 0, bb = 0;
      for (int64_t c = 1; c < a.dim(1); ++c) {
        if (a.GetAsDouble(r * a.dim(1) + c) > a.GetAsDouble(r * a.dim(1) + ba)) ba = c;
        if (b.GetAsDouble(r * a.dim(1) + c) > b.GetAsDouble(r * a.dim(1) + bb)) bb = c;
      }
      st->top1_total++;
      st->top1_agree += ba == bb;
    }
  }
}

// Compares one output; returns an empty string when it matches.
std::string Compare(const Tensor& a, const Tensor& b, const CheckOptions& o, double* max_abs) {
  if (a.dtype() != b.dtype() && !(IsFloat(a.dtype()) && IsFloat(b.dtype())))
    return fmt::format("dtype {} vs {}", DTypeName(a.dtype()), DTypeName(b.dtype()));
  if (a.shape() != b.shape())
    return fmt::format("shape {} vs {}", ShapeToString(a.shape()), ShapeToString(b.shape()));
  if (a.dtype() == DType::kString) {
    for (int64_t i = 0; i < a.size(); ++i)
      if (a.data<std::string>()[i] != b.data<std::string>()[i])
        return fmt::format("string element {} differs", i);
    return "";
  }
  double scale = 0;  // the output's largest finite |reference value|
  for (int64_t i = 0; i < a.size(); ++i) {
    const double x = a.GetAsDouble(i);
    if (std::isfinite(x)) scale = std::max(scale, std::fabs(x));
  }
  const double floor = o.atol + o.scale_rtol * scale;
  for (int64_t i = 0; i < a.size(); ++i) {
    double x = a.GetAsDouble(i), y = b.GetAsDouble(i);
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) return fmt::format("element {}: {} vs {}", i, x, y);
      continue;
    }
    if (std::isinf(x) || std::isinf(y)) {
      if (x != y) return fmt::format("element {}: {} vs {}", i, x, y);
      continue;
    }
    double d = std::fabs(x - y);
    *max_abs = std::max(*max_abs, d);
    if (d > floor + o.rtol * std::fabs(x))
      return fmt::format(
          "element {}: {} vs {} (abs {:.3g} > atol {:g} + rtol {:g} |x| + scale-rtol {:g} x "
          "max|x| {:.3g})",
          i, x, y, d, o.atol, o.rtol, o.scale_rtol, scale);
  }
  return "";
}

// --shape names real inputs, with the declared rank and known dims.
Status CheckShapes(const ir::Graph& g, const std::map<std::string, Shape>& shapes) {
  std::vector<const ir::ValueInfo*> real = g.RealInputs();
  std::string names;
  for (const auto* vi : real) names += (names.empty() ? "" : ", ") + vi->name;
  for (const auto& [name, dims] : shapes) {
    auto it = std::find_if(real.begin(), real.end(),
                           [&name = name](const ir::ValueInfo* v) { return v->name == name; });
    if (it == real.end())
      return UsageError("--shape: unknown input '{}' (the model's inputs are: {})", name, names);
    const ir::TypeInfo& t = (*it)->type;
    if (!t.shape) continue;
    bool ok = t.shape->size() == dims.size();
    for (size_t i = 0; ok && i < dims.size(); ++i)
      ok = !(*t.shape)[i].value || *(*t.shape)[i].value < 0 || *(*t.shape)[i].value == dims[i];
    if (!ok)
      return InvalidError("--shape {}={}: the model declares {}", name, ShapeToString(dims),
                          t.ToString());
  }
  return Status::Ok();
}

std::shared_ptr<const ir::Model> Borrow(const ir::Model& m) {
  return std::shared_ptr<const ir::Model>(&m, [](const ir::Model*) {});
}

}  // namespace

Result<CheckResult> CheckEquivalent(const ir::Model& reference, const ir::Model& candidate,
                                    const CheckOptions& options) {
  runtime::SessionOptions so;
  so.seed = options.seed;
  // The check runs the user's model on Ferry's own initiative: a Loop that never ends (no trip
  // count, a condition that stays true) fails the check instead of hanging optimize/convert.
  so.max_loop_iterations = kCheckMaxLoopIterations;
  CheckResult result;
  FERRY_RETURN_IF_ERROR(CheckShapes(reference.graph, options.shapes));
  // The input sets: the data folder's, or seeded ones of dims the model can run.
  std::vector<ir::DataSet> data;
  if (!options.data.empty()) {
    auto sets = ir::LoadDataSets(options.data, reference.graph, false);
    if (!sets.ok()) return sets.status().With("--check-data");
    data = std::move(sets).value();
    result.data = options.data;
  } else {
    SeedDims dims = ChooseSeedDims({&reference.graph, &candidate.graph}, options.shapes);
    result.seeded_shapes = std::move(dims.shapes);
    result.notes = std::move(dims.notes);
  }
  const int count = options.data.empty() ? options.count : static_cast<int>(data.size());
  FERRY_ASSIGN_OR_RETURN(auto ref, runtime::Session::Create(Borrow(reference), so));
  FERRY_ASSIGN_OR_RETURN(auto cand, runtime::Session::Create(Borrow(candidate), so));
  const auto& names = reference.graph.outputs;
  result.outputs.resize(names.size());
  std::vector<double> dot(names.size()), na(names.size()), nb(names.size());
  for (size_t k = 0; k < names.size(); ++k) result.outputs[k].name = names[k].name;
  std::map<std::string, DType> cand_types;
  for (const ir::ValueInfo* vi : candidate.graph.RealInputs())
    cand_types[vi->name] = vi->type.elem_type;
  for (int set = 0; set < count; ++set) {
    Feeds feeds;
    if (!data.empty()) {
      feeds = std::move(data[static_cast<size_t>(set)].inputs);
    } else {
      FERRY_ASSIGN_OR_RETURN(feeds,
                             MakeInputs(reference, result.seeded_shapes,
                                        options.seed * 1000003 + static_cast<uint64_t>(set)));
    }
    const std::string set_name =
        data.empty() ? fmt::format("input set {}", set) : data[static_cast<size_t>(set)].name;
    auto a = ref->Run(feeds);
    if (!a.ok()) {
      if (!data.empty())
        return a.status().With(fmt::format("check: original model on {}", set_name));
      std::string seeded = DescribeSeeded(reference, result.seeded_shapes);
      return Status(
          a.status().code(),
          fmt::format("check: the original model cannot run on seeded input set {}{}: "
                      "{}; give the inputs' dims with --shape NAME=DIMS or real inputs "
                      "with --check-data DIR",
                      set, seeded.empty() ? "" : " (" + seeded + ")", a.status().message()));
    }
    auto cand_feeds = feeds;
    for (auto& [name, v] : cand_feeds)
      if (v.is_tensor() && cand_types.count(name))
        v = Value(ConvertFloat(v.tensor(), cand_types[name]));
    auto b = cand->Run(cand_feeds);
    if (!b.ok()) return b.status().With(fmt::format("check: optimized model on {}", set_name));
    if (a.value().size() != b.value().size())
      return InvalidError("check: {} outputs vs {}", a.value().size(), b.value().size());
    ++result.sets;
    for (size_t k = 0; k < names.size(); ++k) {
      const Value& va = a.value()[k];
      const Value& vb = b.value()[k];
      std::string diff;
      if (va.kind() != vb.kind()) {
        diff = "value kinds differ";
      } else if (va.is_tensor()) {
        diff = Compare(va.tensor(), vb.tensor(), options, &result.max_abs);
        if (va.tensor().shape() == vb.tensor().shape() && va.tensor().dtype() != DType::kString)
          Accumulate(va.tensor(), vb.tensor(), &result.outputs[k], &dot[k], &na[k], &nb[k]);
      } else if (va.is_sequence()) {
        if (va.sequence().size() != vb.sequence().size()) diff = "sequence lengths differ";
        for (size_t j = 0; diff.empty() && j < va.sequence().size(); ++j)
          diff = Compare(va.sequence()[j], vb.sequence()[j], options, &result.max_abs);
      }
      if (!diff.empty() && result.ok) {
        result.ok = false;
        result.first_failure = fmt::format("output '{}' on {}: {}", names[k].name, set_name, diff);
      }
    }
  }
  for (size_t k = 0; k < names.size(); ++k)
    result.outputs[k].cosine =
        na[k] > 0 && nb[k] > 0 ? dot[k] / std::sqrt(na[k] * nb[k]) : (na[k] == nb[k] ? 1 : 0);
  return result;
}

}  // namespace ferry::passes

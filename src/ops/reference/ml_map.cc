// Reference kernels: ai.onnx.ml maps — ZipMap (score rows -> a sequence of maps from class
// label to score), CastMap (map(int64, string|float) -> a dense or sparse row), DictVectorizer
// (map -> a row over a vocabulary). A map is a Value of kind kMap (core/tensor.h): 1-D keys and
// values; maps are read in ascending key order, as ONNX Runtime's std::map holds them.
#include <numeric>

#include "ops/reference/ml_common.h"

namespace ferry::ops {
namespace ml {

namespace {

// ---- ZipMap ----

Status PrepareZipMap(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, {DType::kFloat}));
  FERRY_ASSIGN_OR_RETURN(ClassLabels labels, ReadClassLabels(ctx, "classlabels_int64s"));
  FERRY_ASSIGN_OR_RETURN(Rows rows, ReadRows(ctx, 0));
  if (rows.c != labels.size())
    return NodeError(ctx, "X has {} columns (shape {}), expected {} (one per class label)", rows.c,
                     ShapeToString(ctx.input(0).shape()), labels.size());
  return Status::Ok();
}

void RunZipMap(OpContext& ctx) {
  ClassLabels labels = *ReadClassLabels(ctx, "classlabels_int64s");
  const Tensor& x = ctx.input(0);
  const int64_t c = labels.size(), n = x.rank() == 1 ? 1 : x.dim(0);
  // Every map shares one keys tensor.
  Tensor keys(labels.strings ? DType::kString : DType::kInt64, {c});
  for (int64_t k = 0; k < c; ++k) WriteLabel(labels, k, keys, k);
  std::vector<Tensor> ks(static_cast<size_t>(n), keys), vs;
  vs.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    Tensor v(DType::kFloat, {c});
    std::copy(x.data<float>() + i * c, x.data<float>() + (i + 1) * c, v.data<float>());
    vs.push_back(std::move(v));
  }
  ctx.set_output_value(0, Value::MapSequence(std::move(ks), std::move(vs), DType::kFloat));
}

// Input 0 must be a map with keys of one of `keys` and values of one of `values`.
Status RequireMap(const OpContext& ctx, std::initializer_list<DType> keys,
                  std::initializer_list<DType> values) {
  if (!ctx.has_input(0) || !ctx.input_value(0).is_map())
    return NodeError(ctx, "input X must be a map");
  const Value& v = ctx.input_value(0);
  auto in = [](DType t, std::initializer_list<DType> l) {
    return std::find(l.begin(), l.end(), t) != l.end();
  };
  if (!in(v.map_keys().dtype(), keys) || !in(v.tensor().dtype(), values))
    return NodeUnsupported(ctx, "X is a map({}, {}), which this op does not take",
                           DTypeName(v.map_keys().dtype()), DTypeName(v.tensor().dtype()));
  if (v.map_keys().rank() != 1 || v.tensor().rank() != 1 ||
      v.map_keys().size() != v.tensor().size())
    return NodeError(ctx, "X's keys {} and values {} must be 1-D of one length",
                     ShapeToString(v.map_keys().shape()), ShapeToString(v.tensor().shape()));
  return Status::Ok();
}

// Positions of a map's entries in ascending key order.
std::vector<int64_t> KeyOrder(const Tensor& keys) {
  std::vector<int64_t> o(static_cast<size_t>(keys.size()));
  std::iota(o.begin(), o.end(), 0);
  if (keys.dtype() == DType::kString)
    std::stable_sort(o.begin(), o.end(), [&](int64_t a, int64_t b) {
      return keys.data<std::string>()[a] < keys.data<std::string>()[b];
    });
  else
    std::stable_sort(o.begin(), o.end(), [&](int64_t a, int64_t b) {
      return keys.data<int64_t>()[a] < keys.data<int64_t>()[b];
    });
  return o;
}

// ---- CastMap ----

Status PrepareCastMap(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireMap(ctx, {DType::kInt64}, {DType::kString, DType::kFloat}));
  const std::string to = ctx.attr_string("cast_to", "TO_FLOAT"),
                    form = ctx.attr_string("map_form", "DENSE");
  DType dt;
  if (to == "TO_FLOAT")
    dt = DType::kFloat;
  else if (to == "TO_STRING")
    dt = DType::kString;
  else if (to == "TO_INT64")
    dt = DType::kInt64;
  else
    return NodeError(ctx, "cast_to '{}' is not one of TO_FLOAT, TO_STRING, TO_INT64", to);
  if (form != "DENSE" && form != "SPARSE")
    return NodeError(ctx, "map_form '{}' is not DENSE or SPARSE", form);
  const Value& m = ctx.input_value(0);
  const int64_t max_map = ctx.attr_int("max_map", 1);
  if (form == "SPARSE" && (max_map <= 0 || max_map > (int64_t{1} << 30)))
    return NodeError(ctx, "max_map = {}, expected 1 to 2^30", max_map);
  if (m.tensor().dtype() == DType::kString && dt != DType::kString) {
    for (int64_t i = 0; i < m.tensor().size(); ++i) {
      const std::string& s = m.tensor().data<std::string>()[i];
      char* end = nullptr;
      errno = 0;
      if (dt == DType::kFloat)
        (void)std::strtof(s.c_str(), &end);
      else
        (void)std::strtoll(s.c_str(), &end, 10);
      if (s.empty() || errno != 0 || *end != '\0')
        return NodeError(ctx, "value '{}' of key {} is not a {}", s,
                         m.map_keys().data<int64_t>()[i], DTypeName(dt));
    }
  }
  const int64_t n = form == "DENSE" ? m.tensor().size() : max_map;
  ctx.set_output(0, dt, {1, n});
  return Status::Ok();
}

void RunCastMap(OpContext& ctx) {
  const Value& m = ctx.input_value(0);
  const Tensor& keys = m.map_keys();
  const Tensor& vals = m.tensor();
  Tensor& y = ctx.output(0);
  const bool dense = ctx.attr_string("map_form", "DENSE") == "DENSE";
  const std::string to = ctx.attr_string("cast_to", "TO_FLOAT");
  auto put = [&](int64_t src, int64_t dst) {
    if (vals.dtype() == DType::kString) {
      const std::string& s = vals.data<std::string>()[src];
      if (to == "TO_STRING")
        y.data<std::string>()[dst] = s;
      else if (to == "TO_FLOAT")
        y.data<float>()[dst] = std::strtof(s.c_str(), nullptr);
      else
        y.data<int64_t>()[dst] = std::strtoll(s.c_str(), nullptr, 10);
      return;
    }
    const float f = vals.data<float>()[src];
    if (to == "TO_STRING")
      y.data<std::string>()[dst] = std::to_string(f);
    else if (to == "TO_FLOAT")
      y.data<float>()[dst] = f;
    else
      y.data<int64_t>()[dst] = static_cast<int64_t>(f);
  };
  const std::vector<int64_t> order = KeyOrder(keys);
  if (dense) {
    for (size_t i = 0; i < order.size(); ++i) put(order[i], static_cast<int64_t>(i));
    return;
  }
  // Sparse: the value of key k at column k; keys outside [0, max_map) are dropped.
  if (y.dtype() == DType::kFloat) std::fill(y.data<float>(), y.data<float>() + y.size(), 0.f);
  if (y.dtype() == DType::kInt64) std::fill(y.data<int64_t>(), y.data<int64_t>() + y.size(), 0);
  for (int64_t i : order) {
    const int64_t k = keys.data<int64_t>()[i];
    if (k >= 0 && k < y.size()) put(i, k);
  }
}

// ---- DictVectorizer ----

Status PrepareDictVectorizer(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireMap(ctx, {DType::kString, DType::kInt64},
                                   {DType::kInt64, DType::kFloat, DType::kDouble, DType::kString}));
  const Value& m = ctx.input_value(0);
  const auto svocab = ctx.node().attr_strings("string_vocabulary");
  const auto ivocab = ctx.attr_ints("int64_vocabulary");
  const bool skeys = m.map_keys().dtype() == DType::kString;
  if (skeys ? svocab.empty() : ivocab.empty())
    return NodeError(ctx, "X has {} keys, expected the attribute {}",
                     DTypeName(m.map_keys().dtype()),
                     skeys ? "string_vocabulary" : "int64_vocabulary");
  ctx.set_output(0, m.tensor().dtype(),
                 {1, static_cast<int64_t>(skeys ? svocab.size() : ivocab.size())});
  return Status::Ok();
}

void RunDictVectorizer(OpContext& ctx) {
  const Value& m = ctx.input_value(0);
  const Tensor& keys = m.map_keys();
  const Tensor& vals = m.tensor();
  Tensor& y = ctx.output(0);
  const size_t es = DTypeSize(vals.dtype());
  if (vals.dtype() != DType::kString) std::memset(y.raw(), 0, y.nbytes());
  const auto svocab = ctx.node().attr_strings("string_vocabulary");
  const auto ivocab = ctx.attr_ints("int64_vocabulary");
  for (int64_t i = 0; i < keys.size(); ++i) {
    int64_t at = -1;
    if (keys.dtype() == DType::kString) {
      auto it = std::find(svocab.begin(), svocab.end(), keys.data<std::string>()[i]);
      if (it != svocab.end()) at = it - svocab.begin();
    } else {
      auto it = std::find(ivocab.begin(), ivocab.end(), keys.data<int64_t>()[i]);
      if (it != ivocab.end()) at = it - ivocab.begin();
    }
    if (at >= 0) CopyElement(vals.dtype(), vals.raw(), i, y.raw(), at, es);
  }
}

constexpr OpDef kOps[] = {
    {kDomain, "ZipMap", 1, nullptr, PrepareZipMap, RunZipMap},
    {kDomain, "CastMap", 1, nullptr, PrepareCastMap, RunCastMap},
    {kDomain, "DictVectorizer", 1, nullptr, PrepareDictVectorizer, RunDictVectorizer},
};

}  // namespace

}  // namespace ml

std::span<const OpDef> MlMapOps() {
  return ml::kOps;
}

}  // namespace ferry::ops

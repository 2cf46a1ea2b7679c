// Reference kernels: ai.onnx.ml encoders and feature plumbing — OneHotEncoder, LabelEncoder
// (opsets 1, 2 and 4: string / int64 / float / double keys and values), CategoryMapper,
// Imputer, ArrayFeatureExtractor, FeatureVectorizer. Data-dependent checks (a category
// OneHotEncoder must not miss, indices in range) run in prepare, which sees the inputs' values.
#include <map>
#include <unordered_map>

#include "ops/reference/ml_common.h"

namespace ferry::ops {
namespace ml {

namespace {

// ---- OneHotEncoder: X (strings or numbers, as int64) -> float X.shape + [categories] ----

Status PrepareOneHotEncoder(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireDType(
      ctx, 0, {DType::kString, DType::kInt64, DType::kInt32, DType::kFloat, DType::kDouble}));
  const Tensor& x = ctx.input(0);
  const auto ints = ctx.attr_ints("cats_int64s");
  const auto strs = ctx.node().attr_strings("cats_strings");
  const bool is_str = x.dtype() == DType::kString;
  if (is_str ? strs.empty() : ints.empty())
    return NodeError(ctx, "X has dtype {}, expected the attribute {} to list the categories",
                     DTypeName(x.dtype()), is_str ? "cats_strings" : "cats_int64s");
  if (ctx.attr_int("zeros", 1) == 0) {
    for (int64_t i = 0; i < x.size(); ++i) {
      const bool found =
          is_str ? std::find(strs.begin(), strs.end(), x.data<std::string>()[i]) != strs.end()
                 : std::find(ints.begin(), ints.end(), static_cast<int64_t>(NumberAt(x, i))) !=
                       ints.end();
      if (!found)
        return NodeError(ctx, "X[{}] = {} is not a category and zeros = 0", i,
                         is_str ? "'" + x.data<std::string>()[i] + "'"
                                : std::to_string(static_cast<int64_t>(NumberAt(x, i))));
    }
  }
  Shape out = x.shape();
  out.push_back(static_cast<int64_t>(is_str ? strs.size() : ints.size()));
  ctx.set_output(0, DType::kFloat, out);
  return Status::Ok();
}

void RunOneHotEncoder(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  float* y = ctx.output(0).data<float>();
  std::fill(y, y + ctx.output(0).size(), 0.f);
  if (x.dtype() == DType::kString) {
    const auto strs = ctx.node().attr_strings("cats_strings");
    std::unordered_map<std::string, int64_t> at;
    for (size_t k = 0; k < strs.size(); ++k) at.emplace(strs[k], static_cast<int64_t>(k));
    const int64_t nc = static_cast<int64_t>(strs.size());
    for (int64_t i = 0; i < x.size(); ++i) {
      auto it = at.find(x.data<std::string>()[i]);
      if (it != at.end()) y[i * nc + it->second] = 1;
    }
    return;
  }
  const auto ints = ctx.attr_ints("cats_int64s");
  std::unordered_map<int64_t, int64_t> at;
  for (size_t k = 0; k < ints.size(); ++k) at.emplace(ints[k], static_cast<int64_t>(k));
  const int64_t nc = static_cast<int64_t>(ints.size());
  for (int64_t i = 0; i < x.size(); ++i) {
    auto it = at.find(static_cast<int64_t>(NumberAt(x, i)));
    if (it != at.end()) y[i * nc + it->second] = 1;
  }
}

// ---- LabelEncoder: keys -> values, default for the rest ----

// A list attribute of keys or values as a tensor: `<name>_strings`, `_int64s`, `_floats`, or
// (opset 4) `<name>_tensor`.
Result<Tensor> ReadLabelList(const OpContext& ctx, std::string_view name) {
  const std::string b(name);
  Tensor out;
  int found = 0;
  if (const ir::Attribute* a = ctx.node().attr(b + "_strings"); a && !a->strings.empty()) {
    out = Tensor(DType::kString, {static_cast<int64_t>(a->strings.size())});
    std::copy(a->strings.begin(), a->strings.end(), out.data<std::string>());
    ++found;
  }
  if (const ir::Attribute* a = ctx.node().attr(b + "_int64s"); a && !a->ints.empty()) {
    out = Tensor::FromVector(a->ints, {static_cast<int64_t>(a->ints.size())});
    ++found;
  }
  if (const ir::Attribute* a = ctx.node().attr(b + "_floats"); a && !a->floats.empty()) {
    out = Tensor::FromVector(a->floats, {static_cast<int64_t>(a->floats.size())});
    ++found;
  }
  if (const ir::Attribute* a = ctx.node().attr(b + "_tensor");
      a && a->type == ir::AttrType::kTensor) {
    out = a->t.Reshaped({a->t.size()});
    ++found;
  }
  if (found != 1)
    return NodeError(
        ctx, "expected exactly one of {0}_strings, {0}_int64s, {0}_floats, {0}_tensor, got {1}",
        name, found);
  return out;
}

struct KeyIndex {
  DType dtype = DType::kUndefined;
  std::unordered_map<std::string, int64_t> strs;
  std::unordered_map<int64_t, int64_t> ints;
  std::map<double, int64_t> reals;
  int64_t nan_at = -1;
  // Index of x[i] among the keys, or -1.
  int64_t Find(const Tensor& x, int64_t i) const {
    if (dtype == DType::kString) {
      auto it = strs.find(x.data<std::string>()[i]);
      return it == strs.end() ? -1 : it->second;
    }
    if (dtype == DType::kInt64 || dtype == DType::kInt32 || dtype == DType::kInt16) {
      auto it = ints.find(x.GetAsInt64(i));
      return it == ints.end() ? -1 : it->second;
    }
    const double v = x.GetAsDouble(i);
    if (std::isnan(v)) return nan_at;
    auto it = reals.find(v);
    return it == reals.end() ? -1 : it->second;
  }
};

KeyIndex IndexKeys(const Tensor& keys) {
  KeyIndex k;
  k.dtype = keys.dtype();
  for (int64_t i = 0; i < keys.size(); ++i) {
    if (k.dtype == DType::kString)
      k.strs.emplace(keys.data<std::string>()[i], i);
    else if (k.dtype == DType::kInt64 || k.dtype == DType::kInt32 || k.dtype == DType::kInt16)
      k.ints.emplace(keys.GetAsInt64(i), i);
    else if (std::isnan(keys.GetAsDouble(i)))
      k.nan_at = k.nan_at < 0 ? i : k.nan_at;
    else
      k.reals.emplace(keys.GetAsDouble(i), i);
  }
  return k;
}

struct LabelState : OpState {
  KeyIndex keys;
  Tensor values;    // [n keys]
  Tensor fallback;  // one element of the values' dtype
};

Status PrepareLabelEncoder(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  const Tensor& x = ctx.input(0);
  auto st = std::make_unique<LabelState>();
  Tensor keys;
  if (ctx.opset() < 2) {
    // Opset 1: classes_strings; strings -> their index, int64 -> the string at that index.
    const auto classes = ctx.node().attr_strings("classes_strings");
    Tensor cls(DType::kString, {static_cast<int64_t>(classes.size())});
    std::copy(classes.begin(), classes.end(), cls.data<std::string>());
    std::vector<int64_t> idx(classes.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
    Tensor ids = Tensor::FromVector(idx, {static_cast<int64_t>(idx.size())});
    if (x.dtype() == DType::kString) {
      keys = cls;
      st->values = ids;
      st->fallback =
          Tensor::FromVector(std::vector<int64_t>{ctx.attr_int("default_int64", -1)}, {1});
    } else if (x.dtype() == DType::kInt64) {
      keys = ids;
      st->values = cls;
      st->fallback = Tensor(DType::kString, {1});
      st->fallback.data<std::string>()[0] = ctx.attr_string("default_string", "_Unused");
    } else {
      return NodeUnsupported(ctx, "X has dtype {}, expected string or int64", DTypeName(x.dtype()));
    }
  } else {
    FERRY_ASSIGN_OR_RETURN(keys, ReadLabelList(ctx, "keys"));
    FERRY_ASSIGN_OR_RETURN(st->values, ReadLabelList(ctx, "values"));
    if (keys.size() != st->values.size())
      return NodeError(ctx, "{} keys and {} values, expected as many values as keys", keys.size(),
                       st->values.size());
    const DType kt = keys.dtype(), vt = st->values.dtype();
    const bool int_like = kt == DType::kInt64 || kt == DType::kInt32 || kt == DType::kInt16;
    if (x.dtype() != kt &&
        !(int_like &&
          (x.dtype() == DType::kInt64 || x.dtype() == DType::kInt32 || x.dtype() == DType::kInt16)))
      return NodeError(ctx, "X has dtype {}, expected the keys' dtype {}", DTypeName(x.dtype()),
                       DTypeName(kt));
    if (vt != DType::kString && vt != DType::kInt64 && vt != DType::kFloat &&
        vt != DType::kDouble && vt != DType::kInt32 && vt != DType::kInt16)
      return NodeUnsupported(ctx, "values have dtype {}", DTypeName(vt));
    st->fallback = Tensor(vt, {1});
    const ir::Attribute* dt = ctx.node().attr("default_tensor");
    if (dt && dt->type == ir::AttrType::kTensor && dt->t.size() >= 1 && dt->t.dtype() == vt) {
      CopyElements(vt, dt->t.raw(), st->fallback.raw(), 1);
    } else if (vt == DType::kString) {
      st->fallback.data<std::string>()[0] = ctx.attr_string("default_string", "_Unused");
    } else if (vt == DType::kFloat) {
      st->fallback.data<float>()[0] = ctx.attr_float("default_float", -0.f);
    } else if (vt == DType::kDouble) {
      st->fallback.data<double>()[0] = ctx.attr_float("default_float", -0.f);
    } else if (vt == DType::kInt64) {
      st->fallback.data<int64_t>()[0] = ctx.attr_int("default_int64", -1);
    } else if (vt == DType::kInt32) {
      st->fallback.data<int32_t>()[0] = static_cast<int32_t>(ctx.attr_int("default_int64", -1));
    } else {
      st->fallback.data<int16_t>()[0] = static_cast<int16_t>(ctx.attr_int("default_int64", -1));
    }
  }
  st->keys = IndexKeys(keys);
  ctx.set_output(0, st->values.dtype(), x.shape());
  ctx.set_state(std::move(st));
  return Status::Ok();
}

void RunLabelEncoder(OpContext& ctx) {
  const LabelState& st = *ctx.state<LabelState>();
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const DType vt = st.values.dtype();
  const size_t es = DTypeSize(vt);
  for (int64_t i = 0; i < x.size(); ++i) {
    const int64_t k = st.keys.Find(x, i);
    if (k >= 0)
      CopyElement(vt, st.values.raw(), k, y.raw(), i, es);
    else
      CopyElement(vt, st.fallback.raw(), 0, y.raw(), i, es);
  }
}

// ---- CategoryMapper: strings <-> int64 through cats_strings / cats_int64s ----

Status PrepareCategoryMapper(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, {DType::kString, DType::kInt64}));
  const size_t ni = ctx.attr_ints("cats_int64s").size(),
               ns = ctx.node().attr_strings("cats_strings").size();
  if (ni != ns)
    return NodeError(ctx, "cats_int64s has {} entries and cats_strings {}, expected the same count",
                     ni, ns);
  ctx.set_output(0, ctx.input(0).dtype() == DType::kString ? DType::kInt64 : DType::kString,
                 ctx.input(0).shape());
  return Status::Ok();
}

void RunCategoryMapper(OpContext& ctx) {
  const auto ints = ctx.attr_ints("cats_int64s");
  const auto strs = ctx.node().attr_strings("cats_strings");
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::kString) {
    std::unordered_map<std::string, int64_t> m;
    for (size_t k = 0; k < strs.size(); ++k) m.emplace(strs[k], ints[k]);
    const int64_t def = ctx.attr_int("default_int64", -1);
    for (int64_t i = 0; i < x.size(); ++i) {
      auto it = m.find(x.data<std::string>()[i]);
      ctx.output(0).data<int64_t>()[i] = it == m.end() ? def : it->second;
    }
    return;
  }
  std::unordered_map<int64_t, std::string> m;
  for (size_t k = 0; k < strs.size(); ++k) m.emplace(ints[k], strs[k]);
  const std::string def = ctx.attr_string("default_string", "_Unused");
  for (int64_t i = 0; i < x.size(); ++i) {
    auto it = m.find(x.data<int64_t>()[i]);
    ctx.output(0).data<std::string>()[i] = it == m.end() ? def : it->second;
  }
}

// ---- Imputer: replaced_value (NaN matches NaN) -> the column's imputed value ----

Status PrepareImputer(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(
      RequireDType(ctx, 0, {DType::kFloat, DType::kDouble, DType::kInt64, DType::kInt32}));
  const Tensor& x = ctx.input(0);
  const bool real = x.dtype() == DType::kFloat || x.dtype() == DType::kDouble;
  const size_t nv = real ? ctx.attr_floats("imputed_value_floats").size()
                         : ctx.attr_ints("imputed_value_int64s").size();
  const int64_t c = x.rank() == 0 ? 1 : x.dim(x.rank() - 1);
  if (nv != 1 && static_cast<int64_t>(nv) != c)
    return NodeError(ctx, "{} has {} entries, expected 1 or {} (X's last dim)",
                     real ? "imputed_value_floats" : "imputed_value_int64s", nv, c);
  ctx.set_output(0, x.dtype(), x.shape());
  return Status::Ok();
}

void RunImputer(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const int64_t c = x.rank() == 0 ? 1 : x.dim(x.rank() - 1);
  if (x.dtype() == DType::kFloat || x.dtype() == DType::kDouble) {
    const auto vals = ctx.attr_floats("imputed_value_floats");
    const float rep = ctx.attr_float("replaced_value_float", 0.f);
    for (int64_t i = 0; i < x.size(); ++i) {
      const double v = NumberAt(x, i);
      const bool hit = std::isnan(rep) ? std::isnan(v) : v == rep;
      const double out = hit ? vals[vals.size() == 1 ? 0 : static_cast<size_t>(i % c)] : v;
      if (x.dtype() == DType::kFloat)
        y.data<float>()[i] = static_cast<float>(out);
      else
        y.data<double>()[i] = out;
    }
    return;
  }
  const auto vals = ctx.attr_ints("imputed_value_int64s");
  const int64_t rep = ctx.attr_int("replaced_value_int64", 0);
  for (int64_t i = 0; i < x.size(); ++i) {
    const int64_t v = x.GetAsInt64(i);
    const int64_t out = v == rep ? vals[vals.size() == 1 ? 0 : static_cast<size_t>(i % c)] : v;
    if (x.dtype() == DType::kInt64)
      y.data<int64_t>()[i] = out;
    else
      y.data<int32_t>()[i] = static_cast<int32_t>(out);
  }
}

// ---- ArrayFeatureExtractor: X[..., Y] over the last axis ----

Status PrepareArrayFeatureExtractor(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "Y"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, {DType::kInt64}));
  const Tensor& x = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  if (x.rank() == 0) return NodeError(ctx, "X is a scalar, expected rank 1 or more");
  const int64_t c = x.dim(x.rank() - 1);
  for (int64_t i = 0; i < idx.size(); ++i)
    if (idx.data<int64_t>()[i] < 0 || idx.data<int64_t>()[i] >= c)
      return NodeError(ctx, "Y[{}] = {}, expected 0 to {} (X's last dim)", i,
                       idx.data<int64_t>()[i], c - 1);
  Shape out = x.shape();
  if (x.rank() == 1) out.insert(out.begin(), 1);
  out.back() = idx.size();
  ctx.set_output(0, x.dtype(), out);
  return Status::Ok();
}

void RunArrayFeatureExtractor(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  Tensor& y = ctx.output(0);
  const int64_t c = x.dim(x.rank() - 1), rows = c ? x.size() / c : 0, k = idx.size();
  const size_t es = DTypeSize(x.dtype());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j)
      CopyElement(x.dtype(), x.raw(), r * c + idx.data<int64_t>()[j], y.raw(), r * k + j, es);
}

// ---- FeatureVectorizer: inputs' columns side by side, each cut or zero-padded to its
// inputdimensions entry, as float [N, sum] ----

Status PrepareFeatureVectorizer(OpContext& ctx) {
  const auto dims = ctx.attr_ints("inputdimensions");
  if (ctx.num_inputs() == 0) return NodeError(ctx, "has no inputs");
  if (dims.size() != ctx.num_inputs())
    return NodeError(ctx, "inputdimensions has {} entries, expected {} (one per input)",
                     dims.size(), ctx.num_inputs());
  int64_t n = -1, total = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, "X"));
    FERRY_RETURN_IF_ERROR(
        RequireDType(ctx, i, {DType::kFloat, DType::kDouble, DType::kInt64, DType::kInt32}));
    const Tensor& x = ctx.input(i);
    const int64_t rows = x.rank() <= 1 ? 1 : x.dim(0);
    if (n >= 0 && rows != n)
      return NodeError(ctx, "input {} has {} rows, expected {} (input 0's)", i, rows, n);
    n = rows;
    if (dims[i] < 0) return NodeError(ctx, "inputdimensions[{}] = {}, expected >= 0", i, dims[i]);
    total += dims[i];
  }
  ctx.set_output(0, DType::kFloat, {n, total});
  return Status::Ok();
}

void RunFeatureVectorizer(OpContext& ctx) {
  const auto dims = ctx.attr_ints("inputdimensions");
  Tensor& y = ctx.output(0);
  const int64_t n = y.dim(0), total = y.dim(1);
  float* out = y.data<float>();
  std::fill(out, out + y.size(), 0.f);
  int64_t col = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& x = ctx.input(i);
    const int64_t c = n ? x.size() / n : 0, take = std::min(c, dims[i]);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < take; ++j)
        out[r * total + col + j] = static_cast<float>(NumberAt(x, r * c + j));
    col += dims[i];
  }
}

constexpr OpDef kOps[] = {
    {kDomain, "OneHotEncoder", 1, nullptr, PrepareOneHotEncoder, RunOneHotEncoder},
    {kDomain, "LabelEncoder", 1, nullptr, PrepareLabelEncoder, RunLabelEncoder},
    {kDomain, "CategoryMapper", 1, nullptr, PrepareCategoryMapper, RunCategoryMapper},
    {kDomain, "Imputer", 1, nullptr, PrepareImputer, RunImputer},
    {kDomain, "ArrayFeatureExtractor", 1, nullptr, PrepareArrayFeatureExtractor,
     RunArrayFeatureExtractor},
    {kDomain, "FeatureVectorizer", 1, nullptr, PrepareFeatureVectorizer, RunFeatureVectorizer},
};

}  // namespace

}  // namespace ml

std::span<const OpDef> MlEncodeOps() {
  return ml::kOps;
}

}  // namespace ferry::ops

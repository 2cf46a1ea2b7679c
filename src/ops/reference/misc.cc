// Reference kernels: random ops (RandomNormal, RandomUniform, their *Like forms, Bernoulli,
// Multinomial), strings (StringNormalizer, TfIdfVectorizer) and losses
// (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss). Signal ops live in signal.cc.
#include <cwctype>
#include <locale>
#include <map>
#include <random>

#include "ops/reference/common.h"

namespace ferry::ops {

namespace {

// Stores `v` into element i of `t` (any numeric or bool dtype).
void StoreAs(Tensor& t, int64_t i, double v) {
  VisitPod(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    t.data<T>()[i] = static_cast<T>(static_cast<ComputeType<T>>(v));
  });
}

Result<DType> DTypeAttr(const OpContext& ctx, std::string_view name, DType def) {
  if (!ctx.has_attr(name)) return def;
  int64_t code = ctx.attr_int(name, 0);
  auto dt = DTypeFromCode(static_cast<int>(code));
  if (!dt) return NodeUnsupported(ctx, "{} {} is not a supported dtype", name, code);
  return *dt;
}

bool IsFloatingOutput(DType t) {
  return t == DType::kFloat || t == DType::kDouble || t == DType::kFloat16 || t == DType::kBFloat16;
}

// ---- random ops ----
// The generator is seeded from the `seed` attribute when present, else from the session seed
// mixed with the node's first output name so that nodes draw different streams.
std::mt19937_64 MakeGenerator(const OpContext& ctx) {
  if (ctx.has_attr("seed")) {
    float s = ctx.attr_float("seed", 0);
    uint32_t bits;
    std::memcpy(&bits, &s, sizeof(bits));
    return std::mt19937_64(bits);
  }
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the output name
  const std::string& name = ctx.node().outputs.empty() ? ctx.node().name : ctx.node().outputs[0];
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return std::mt19937_64(h ^ ctx.seed());
}

// Random{Normal,Uniform}[Like]: output dtype and shape.
Result<std::pair<DType, Shape>> RandomOutput(const OpContext& ctx, bool like) {
  DType dt = DType::kFloat;
  Shape shape;
  if (like) {
    FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
    FERRY_ASSIGN_OR_RETURN(dt, DTypeAttr(ctx, "dtype", ctx.input(0).dtype()));
    shape = ctx.input(0).shape();
  } else {
    FERRY_RETURN_IF_ERROR(CheckArity(ctx, 0, 0));
    FERRY_ASSIGN_OR_RETURN(dt, DTypeAttr(ctx, "dtype", DType::kFloat));
    if (!ctx.has_attr("shape")) return NodeError(ctx, "is missing the required attribute 'shape'");
    shape = ctx.attr_ints("shape");
    for (int64_t d : shape)
      if (d < 0) return NodeError(ctx, "shape {} has a negative dim", ShapeToString(shape));
  }
  if (!IsFloatingOutput(dt))
    return NodeUnsupported(ctx, "output dtype {} is not a float type", DTypeName(dt));
  return std::pair<DType, Shape>{dt, shape};
}

template <bool kLike>
Status PrepareRandom(OpContext& ctx) {
  FERRY_ASSIGN_OR_RETURN(auto out, RandomOutput(ctx, kLike));
  ctx.set_output(0, out.first, out.second);
  return Status::Ok();
}

void RunRandomNormal(OpContext& ctx) {
  auto gen = MakeGenerator(ctx);
  std::normal_distribution<double> dist(ctx.attr_float("mean", 0.f), ctx.attr_float("scale", 1.f));
  Tensor& out = ctx.output(0);
  for (int64_t i = 0; i < out.size(); ++i) StoreAs(out, i, dist(gen));
}

void RunRandomUniform(OpContext& ctx) {
  auto gen = MakeGenerator(ctx);
  double low = ctx.attr_float("low", 0.f), high = ctx.attr_float("high", 1.f);
  std::uniform_real_distribution<double> dist(0.0, 1.0);
  Tensor& out = ctx.output(0);
  for (int64_t i = 0; i < out.size(); ++i) StoreAs(out, i, low + (high - low) * dist(gen));
}

// ---- Bernoulli ----
Status PrepareBernoulli(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  FERRY_RETURN_IF_ERROR(
      RequireDType(ctx, 0, {DType::kFloat, DType::kDouble, DType::kFloat16, DType::kBFloat16}));
  FERRY_ASSIGN_OR_RETURN(DType dt, DTypeAttr(ctx, "dtype", ctx.input(0).dtype()));
  if (dt == DType::kString) return NodeUnsupported(ctx, "output dtype string is not supported");
  ctx.set_output(0, dt, ctx.input(0).shape());
  return Status::Ok();
}

void RunBernoulli(OpContext& ctx) {
  auto gen = MakeGenerator(ctx);
  std::uniform_real_distribution<double> dist(0.0, 1.0);
  const Tensor& p = ctx.input(0);
  Tensor& out = ctx.output(0);
  for (int64_t i = 0; i < out.size(); ++i)
    StoreAs(out, i, dist(gen) < p.GetAsDouble(i) ? 1.0 : 0.0);
}

// ---- Multinomial ----
Status PrepareMultinomial(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  FERRY_RETURN_IF_ERROR(
      RequireDType(ctx, 0, {DType::kFloat, DType::kDouble, DType::kFloat16, DType::kBFloat16}));
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2)
    return NodeError(ctx, "input has rank {}, expected 2 [batch, classes]", x.rank());
  if (x.dim(1) < 1) return NodeError(ctx, "input has {} classes, expected at least 1", x.dim(1));
  FERRY_ASSIGN_OR_RETURN(DType dt, DTypeAttr(ctx, "dtype", DType::kInt32));
  if (dt != DType::kInt32 && dt != DType::kInt64)
    return NodeUnsupported(ctx, "output dtype {} is not int32 or int64", DTypeName(dt));
  int64_t samples = ctx.attr_int("sample_size", 1);
  if (samples < 0) return NodeError(ctx, "sample_size is {}, expected >= 0", samples);
  ctx.set_output(0, dt, {x.dim(0), samples});
  return Status::Ok();
}

void RunMultinomial(OpContext& ctx) {
  auto gen = MakeGenerator(ctx);
  std::uniform_real_distribution<double> dist(0.0, 1.0);
  const Tensor& x = ctx.input(0);
  Tensor& out = ctx.output(0);
  int64_t batch = x.dim(0), classes = x.dim(1), samples = out.dim(1);
  std::vector<double> cdf(static_cast<size_t>(classes));
  for (int64_t b = 0; b < batch; ++b) {
    // The input holds unnormalised log-probabilities.
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, x.GetAsDouble(b * classes + c));
    double acc = 0;
    for (int64_t c = 0; c < classes; ++c) {
      acc += std::exp(x.GetAsDouble(b * classes + c) - mx);
      cdf[static_cast<size_t>(c)] = acc;
    }
    for (int64_t s = 0; s < samples; ++s) {
      double u = dist(gen) * acc;
      int64_t c = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
      StoreAs(out, b * samples + s, static_cast<double>(std::min(c, classes - 1)));
    }
  }
}

// ---- StringNormalizer ----
// UTF-8 <-> code points, for case mapping through a wchar_t ctype facet.
std::u32string DecodeUtf8(const std::string& s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + static_cast<size_t>(len) > s.size()) {  // invalid byte: keep it as is
      out.push_back(c);
      ++i;
      continue;
    }
    char32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out.push_back(cp);
    i += static_cast<size_t>(len);
  }
  return out;
}

std::string EncodeUtf8(const std::u32string& s) {
  std::string out;
  for (char32_t cp : s) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }
  return out;
}

// The locale named by the attribute (as "<locale>.UTF-8"), else C.UTF-8, else the classic one.
std::locale CaseLocale(const std::string& name) {
  for (const std::string& n : {name + ".UTF-8", name, std::string("C.UTF-8")}) {
    if (n.empty() || n == ".UTF-8") continue;
    try {
      return std::locale(n);
    } catch (const std::exception&) {
    }
  }
  return std::locale::classic();
}

std::string ChangeCase(const std::string& s, bool upper, const std::locale& loc) {
  const auto& facet = std::use_facet<std::ctype<wchar_t>>(loc);
  std::u32string cps = DecodeUtf8(s);
  for (char32_t& cp : cps) {
    wchar_t w = static_cast<wchar_t>(cp);
    cp = static_cast<char32_t>(upper ? facet.toupper(w) : facet.tolower(w));
  }
  return EncodeUtf8(cps);
}

Status PrepareStringNormalizer(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, {DType::kString}));
  const Tensor& x = ctx.input(0);
  if (!(x.rank() == 1 || (x.rank() == 2 && x.dim(0) == 1)))
    return NodeError(ctx, "X has shape {}, expected [C] or [1, C]", ShapeToString(x.shape()));
  std::string action = ctx.attr_string("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    return NodeError(ctx, "case_change_action is '{}', expected NONE, LOWER or UPPER", action);
  return Status::Ok();
}

void RunStringNormalizer(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::string action = ctx.attr_string("case_change_action", "NONE");
  bool case_sensitive = ctx.attr_int("is_case_sensitive", 0) != 0;
  std::locale loc = CaseLocale(ctx.attr_string("locale", "en_US"));
  std::vector<std::string> stop = ctx.node().attr_strings("stopwords");
  if (!case_sensitive)
    for (auto& w : stop) w = ChangeCase(w, false, loc);
  std::vector<std::string> kept;
  for (const std::string& s : x.span<std::string>()) {
    std::string key = case_sensitive ? s : ChangeCase(s, false, loc);
    if (std::find(stop.begin(), stop.end(), key) != stop.end()) continue;
    if (action == "NONE")
      kept.push_back(s);
    else
      kept.push_back(ChangeCase(s, action == "UPPER", loc));
  }
  if (kept.empty()) kept.emplace_back();  // all dropped: one empty string
  int64_t n = static_cast<int64_t>(kept.size());
  Tensor& out = ctx.allocate_output(0, DType::kString, x.rank() == 1 ? Shape{n} : Shape{1, n});
  std::copy(kept.begin(), kept.end(), out.data<std::string>());
}

// ---- TfIdfVectorizer ----
// Maps each pool n-gram (as a vector of keys) to its output coordinate and pool position.
template <typename K>
struct NgramPool {
  std::map<std::vector<K>, std::pair<int64_t, size_t>> index;  // -> (ngram_indexes[i], i)
  size_t total = 0;                                            // n-grams in the pool
};

template <typename K>
Result<NgramPool<K>> BuildPool(const OpContext& ctx, const std::vector<K>& pool) {
  std::vector<int64_t> counts = ctx.attr_ints("ngram_counts");
  std::vector<int64_t> indexes = ctx.attr_ints("ngram_indexes");
  NgramPool<K> p;
  size_t ngram = 0;
  for (size_t level = 0; level < counts.size(); ++level) {
    int64_t begin = counts[level];
    int64_t end = level + 1 < counts.size() ? counts[level + 1] : static_cast<int64_t>(pool.size());
    size_t n = level + 1;
    if (begin < 0 || end < begin || end > static_cast<int64_t>(pool.size()) ||
        (end - begin) % static_cast<int64_t>(n) != 0)
      return NodeError(ctx,
                       "ngram_counts [{}] = {} does not split a pool of {} items into {}-grams",
                       level, begin, pool.size(), n);
    for (int64_t i = begin; i < end; i += static_cast<int64_t>(n), ++ngram) {
      if (ngram >= indexes.size())
        return NodeError(ctx, "ngram_indexes has {} values, but the pool holds more n-grams",
                         indexes.size());
      std::vector<K> key(pool.begin() + i, pool.begin() + i + static_cast<int64_t>(n));
      p.index[key] = {indexes[ngram], ngram};
    }
  }
  p.total = ngram;
  if (ngram != indexes.size())
    return NodeError(ctx, "ngram_indexes has {} values, expected {} (the pool's n-grams)",
                     indexes.size(), ngram);
  return p;
}

Status PrepareTfIdfVectorizer(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  const Tensor& x = ctx.input(0);
  bool strings = ctx.has_attr("pool_strings");
  if (strings == ctx.has_attr("pool_int64s"))
    return NodeError(ctx, "needs exactly one of pool_strings and pool_int64s");
  if (strings)
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, {DType::kString}));
  else
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, {DType::kInt32, DType::kInt64}));
  if (x.rank() != 1 && x.rank() != 2)
    return NodeError(ctx, "X has rank {}, expected 1 or 2", x.rank());
  std::string mode = ctx.attr_string("mode", "");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF")
    return NodeError(ctx, "mode is '{}', expected TF, IDF or TFIDF", mode);
  int64_t min_n = ctx.attr_int("min_gram_length", 0), max_n = ctx.attr_int("max_gram_length", 0);
  if (min_n < 1 || max_n < min_n)
    return NodeError(ctx, "min_gram_length {} and max_gram_length {} must satisfy 1 <= min <= max",
                     min_n, max_n);
  if (ctx.attr_int("max_skip_count", 0) < 0)
    return NodeError(ctx, "max_skip_count is {}, expected >= 0", ctx.attr_int("max_skip_count", 0));
  std::vector<int64_t> indexes = ctx.attr_ints("ngram_indexes");
  if (indexes.empty()) return NodeError(ctx, "ngram_indexes is empty");
  for (int64_t i : indexes)
    if (i < 0) return NodeError(ctx, "ngram_indexes has a negative value {}", i);
  std::vector<float> weights = ctx.attr_floats("weights");
  if (!weights.empty() && weights.size() != indexes.size())
    return NodeError(ctx, "weights has {} values, expected {} (ngram_indexes')", weights.size(),
                     indexes.size());
  if (strings)
    FERRY_RETURN_IF_ERROR(BuildPool(ctx, ctx.node().attr_strings("pool_strings")).status());
  else
    FERRY_RETURN_IF_ERROR(BuildPool(ctx, ctx.attr_ints("pool_int64s")).status());
  int64_t width = *std::max_element(indexes.begin(), indexes.end()) + 1;
  ctx.set_output(0, DType::kFloat, x.rank() == 1 ? Shape{width} : Shape{x.dim(0), width});
  return Status::Ok();
}

template <typename K>
void CountNgrams(OpContext& ctx, const std::vector<K>& keys, const std::vector<K>& pool_items) {
  NgramPool<K> pool = BuildPool(ctx, pool_items).value();
  const Tensor& x = ctx.input(0);
  Tensor& out = ctx.output(0);
  int64_t rows = x.rank() == 1 ? 1 : x.dim(0), cols = x.rank() == 1 ? x.dim(0) : x.dim(1);
  int64_t width = out.shape().back();
  size_t min_n = static_cast<size_t>(ctx.attr_int("min_gram_length", 1));
  size_t max_n = static_cast<size_t>(ctx.attr_int("max_gram_length", 1));
  int64_t max_skip = ctx.attr_int("max_skip_count", 0);
  std::string mode = ctx.attr_string("mode", "TF");
  std::vector<float> weights = ctx.attr_floats("weights");
  float* y = out.data<float>();
  std::fill(y, y + out.size(), 0.f);  // n-grams absent from a row count 0
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> counts(pool.total, 0);
    std::vector<int64_t> coord(counts.size(), 0);
    const K* row = keys.data() + r * cols;
    for (int64_t start = 0; start < cols; ++start) {
      for (size_t n = min_n; n <= max_n; ++n) {
        // A 1-gram is the same for every skip: count it once.
        int64_t skips = n == 1 ? 0 : max_skip;
        for (int64_t skip = 0; skip <= skips; ++skip) {
          int64_t step = skip + 1;
          if (start + static_cast<int64_t>(n - 1) * step >= cols) break;
          std::vector<K> key(n);
          for (size_t k = 0; k < n; ++k) key[k] = row[start + static_cast<int64_t>(k) * step];
          auto it = pool.index.find(key);
          if (it == pool.index.end()) continue;
          counts[it->second.second] += 1;
          coord[it->second.second] = it->second.first;
        }
      }
    }
    float* yr = y + r * width;
    for (size_t i = 0; i < counts.size(); ++i) {
      if (counts[i] == 0) continue;
      double w = weights.empty() ? 1.0 : weights[i];
      double v = mode == "TF" ? counts[i] : mode == "IDF" ? w : counts[i] * w;
      yr[coord[i]] += static_cast<float>(v);
    }
  }
}

void RunTfIdfVectorizer(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::kString) {
    std::vector<std::string> keys(x.span<std::string>().begin(), x.span<std::string>().end());
    CountNgrams(ctx, keys, ctx.node().attr_strings("pool_strings"));
  } else {
    CountNgrams(ctx, x.ToInt64Vector(), ctx.attr_ints("pool_int64s"));
  }
}

// ---- NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss ----
// input [N, C, d1..dk], target [N, d1..dk]; weight [C] optional.
Status CheckLossInputs(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "target"));
  FERRY_RETURN_IF_ERROR(
      RequireDType(ctx, 0, {DType::kFloat, DType::kDouble, DType::kFloat16, DType::kBFloat16}));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, {DType::kInt32, DType::kInt64}));
  const Tensor& x = ctx.input(0);
  const Tensor& t = ctx.input(1);
  if (x.rank() < 2)
    return NodeError(ctx, "input has rank {}, expected at least 2 [N, C, ...]", x.rank());
  Shape want = x.shape();
  want.erase(want.begin() + 1);
  if (t.shape() != want)
    return NodeError(ctx, "target has shape {}, expected {} (input {} without C)",
                     ShapeToString(t.shape()), ShapeToString(want), ShapeToString(x.shape()));
  int64_t classes = x.dim(1);
  if (ctx.has_input(2)) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 2, "weight"));
    if (ctx.input(2).dtype() != x.dtype())
      return NodeError(ctx, "weight has dtype {}, expected {}", DTypeName(ctx.input(2).dtype()),
                       DTypeName(x.dtype()));
    if (ctx.input(2).shape() != Shape{classes})
      return NodeError(ctx, "weight has shape {}, expected [{}]",
                       ShapeToString(ctx.input(2).shape()), classes);
  }
  std::string red = ctx.attr_string("reduction", "mean");
  if (red != "none" && red != "sum" && red != "mean")
    return NodeError(ctx, "reduction is '{}', expected none, sum or mean", red);
  bool has_ii = ctx.has_attr("ignore_index");
  int64_t ii = ctx.attr_int("ignore_index", 0);
  for (int64_t i = 0; i < t.size(); ++i) {
    int64_t c = t.GetAsInt64(i);
    if ((c < 0 || c >= classes) && !(has_ii && c == ii))
      return NodeError(ctx, "target value {} is out of range [0, {})", c, classes);
  }
  ctx.set_output(0, x.dtype(), red == "none" ? t.shape() : Shape{});
  return Status::Ok();
}

// Computes the loss from log-probabilities `logp` laid out as input [N, C, D].
void LossFromLogProb(OpContext& ctx, const std::vector<double>& logp) {
  const Tensor& x = ctx.input(0);
  const Tensor& t = ctx.input(1);
  int64_t n = x.dim(0), classes = x.dim(1);
  int64_t d = NumElements(Shape(x.shape().begin() + 2, x.shape().end()));
  bool has_ii = ctx.has_attr("ignore_index");
  int64_t ii = ctx.attr_int("ignore_index", 0);
  std::string red = ctx.attr_string("reduction", "mean");
  Tensor& out = ctx.output(0);
  double sum = 0, wsum = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < d; ++k) {
      int64_t c = t.GetAsInt64(i * d + k);
      double w = 0, loss = 0;
      if (!(has_ii && c == ii)) {
        w = ctx.has_input(2) ? ctx.input(2).GetAsDouble(c) : 1.0;
        loss = -logp[static_cast<size_t>((i * classes + c) * d + k)] * w;
      }
      if (red == "none") StoreAs(out, i * d + k, loss);
      sum += loss;
      wsum += w;
    }
  }
  if (red == "sum")
    StoreAs(out, 0, sum);
  else if (red == "mean")
    StoreAs(out, 0, sum / wsum);
}

Status PrepareNllLoss(OpContext& ctx) {
  return CheckLossInputs(ctx);
}

void RunNllLoss(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<double> v(static_cast<size_t>(x.size()));
  for (int64_t i = 0; i < x.size(); ++i) v[static_cast<size_t>(i)] = x.GetAsDouble(i);
  LossFromLogProb(ctx, v);
}

Status PrepareSoftmaxCrossEntropyLoss(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckLossInputs(ctx));
  if (ctx.num_outputs() > 1) ctx.set_output(1, ctx.input(0).dtype(), ctx.input(0).shape());
  return Status::Ok();
}

void RunSoftmaxCrossEntropyLoss(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t n = x.dim(0), classes = x.dim(1);
  int64_t d = NumElements(Shape(x.shape().begin() + 2, x.shape().end()));
  std::vector<double> logp(static_cast<size_t>(x.size()));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < d; ++k) {
      auto at = [&](int64_t c) { return (i * classes + c) * d + k; };
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, x.GetAsDouble(at(c)));
      double s = 0;
      for (int64_t c = 0; c < classes; ++c) s += std::exp(x.GetAsDouble(at(c)) - mx);
      double lse = mx + std::log(s);
      for (int64_t c = 0; c < classes; ++c)
        logp[static_cast<size_t>(at(c))] = x.GetAsDouble(at(c)) - lse;
    }
  }
  LossFromLogProb(ctx, logp);
  if (ctx.num_outputs() > 1)
    for (int64_t i = 0; i < x.size(); ++i) StoreAs(ctx.output(1), i, logp[static_cast<size_t>(i)]);
}

constexpr OpDef kOps[] = {
    {"", "RandomNormal", 1, nullptr, PrepareRandom<false>, RunRandomNormal},
    {"", "RandomUniform", 1, nullptr, PrepareRandom<false>, RunRandomUniform},
    {"", "RandomNormalLike", 1, nullptr, PrepareRandom<true>, RunRandomNormal},
    {"", "RandomUniformLike", 1, nullptr, PrepareRandom<true>, RunRandomUniform},
    {"", "Bernoulli", 15, nullptr, PrepareBernoulli, RunBernoulli},
    {"", "Multinomial", 7, nullptr, PrepareMultinomial, RunMultinomial},
    {"", "StringNormalizer", 10, nullptr, PrepareStringNormalizer, RunStringNormalizer},
    {"", "TfIdfVectorizer", 9, nullptr, PrepareTfIdfVectorizer, RunTfIdfVectorizer},
    {"", "NegativeLogLikelihoodLoss", 12, nullptr, PrepareNllLoss, RunNllLoss},
    {"", "SoftmaxCrossEntropyLoss", 12, nullptr, PrepareSoftmaxCrossEntropyLoss,
     RunSoftmaxCrossEntropyLoss},
};

}  // namespace

std::span<const OpDef> MiscOps() {
  return kOps;
}

}  // namespace ferry::ops

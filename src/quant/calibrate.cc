#include "quant/calibrate.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/npy.h"
#include "passes/pass_manager.h"
#include "quant/data.h"

namespace ferry::quant {

std::string Method::ToString() const {
  switch (kind) {
    case Kind::kMinMax:
      return "minmax";
    case Kind::kPercentile:
      return fmt::format("percentile:{:g}", percentile);
    case Kind::kEntropy:
      return "entropy";
  }
  return "minmax";
}

Result<Method> ParseMethod(const std::string& text) {
  Method m;
  if (text == "minmax") return m;
  if (text == "entropy") {
    m.kind = Method::Kind::kEntropy;
    return m;
  }
  if (text == "percentile" || text.rfind("percentile:", 0) == 0) {
    m.kind = Method::Kind::kPercentile;
    if (text.size() > 11) {
      std::string p = text.substr(11);
      char* end = nullptr;
      m.percentile = std::strtod(p.c_str(), &end);
      if (p.empty() || *end != '\0' || !(m.percentile > 0 && m.percentile <= 100))
        return UsageError("--method percentile:P needs 0 < P <= 100, got '{}'", p);
    }
    return m;
  }
  return UsageError("--method must be minmax, percentile[:P] or entropy, got '{}'", text);
}

// ---- histogram ----

namespace {

// Values per parallel work item of Histogram::Add.
constexpr int64_t kHistChunk = int64_t{1} << 15;

bool Finite(float v) {
  return std::fabs(v) <= std::numeric_limits<float>::max();
}

}  // namespace

// Two passes over x, each split into chunks over the OpenMP threads (the session's pool, so no
// second set of threads spins beside it): min/max and the non-finite count, then the bin
// counts. Counts are integers and min/max are order-free, so the result does not depend on the
// thread count. Four sub-histograms per thread break the store-to-load chain of runs of equal
// values (a ReLU output is half zeros, all in one bin).
void Histogram::Add(const float* x, int64_t n) {
  const int64_t chunks = (n + kHistChunk - 1) / kHistChunk;
  float bmin = std::numeric_limits<float>::infinity(), bmax = -bmin;
  int64_t bad = 0;
#pragma omp parallel for schedule(static) reduction(min : bmin) reduction(max : bmax) \
    reduction(+ : bad) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const float* p = x + c * kHistChunk;
    const int64_t m = std::min(kHistChunk, n - c * kHistChunk);
    float lo = bmin, hi = bmax;
    int64_t nb = 0;
    for (int64_t i = 0; i < m; ++i) {
      const float v = p[i];
      const bool ok = Finite(v);
      nb += !ok;
      lo = ok && v < lo ? v : lo;
      hi = ok && v > hi ? v : hi;
    }
    bmin = std::min(bmin, lo);
    bmax = std::max(bmax, hi);
    bad += nb;
  }
  if (bmin == 0) bmin = 0;  // +0 whichever zero a chunk saw first: thread-count independent
  if (bmax == 0) bmax = 0;
  non_finite += bad;
  const int64_t finite = n - bad;
  if (finite == 0) return;
  if (bins.empty()) {
    min = bmin;
    max = bmax;
    lo = bmin;
    hi = bmax;
    if (!(hi > lo)) hi = lo + std::max(1e-6 * std::fabs(lo), 1e-30);
    bins.assign(kBins, 0.0);
  } else {
    min = std::min<double>(min, bmin);
    max = std::max<double>(max, bmax);
    if (bmin < lo || bmax > hi) {
      double w = hi - lo;
      double nlo = bmin < lo ? std::min<double>(bmin, lo - 0.25 * w) : lo;
      double nhi = bmax > hi ? std::max<double>(bmax, hi + 0.25 * w) : hi;
      Grow(nlo, nhi);
    }
  }
  count += finite;
  const double base = lo, k = kBins / (hi - lo);
  std::vector<int64_t> total(kBins, 0);
#pragma omp parallel if (chunks > 1)
  {
    std::vector<uint32_t> sub(4 * kBins, 0);  // chunk counts fit: kHistChunk < 2^32
    std::vector<int64_t> mine(kBins, 0);
#pragma omp for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const float* p = x + c * kHistChunk;
      const int64_t m = std::min(kHistChunk, n - c * kHistChunk);
      for (int64_t i = 0; i < m; ++i) {
        const float v = p[i];
        if (!Finite(v)) continue;
        auto b = static_cast<int64_t>((v - base) * k);
        ++sub[static_cast<size_t>((i & 3) * kBins + std::clamp<int64_t>(b, 0, kBins - 1))];
      }
      for (int j = 0; j < kBins; ++j) {
        const size_t u = static_cast<size_t>(j);
        mine[u] += int64_t{sub[u]} + sub[u + kBins] + sub[u + 2 * kBins] + sub[u + 3 * kBins];
        sub[u] = sub[u + kBins] = sub[u + 2 * kBins] = sub[u + 3 * kBins] = 0;
      }
    }
#pragma omp critical(ferry_histogram)
    for (int j = 0; j < kBins; ++j) total[static_cast<size_t>(j)] += mine[static_cast<size_t>(j)];
  }
  for (int j = 0; j < kBins; ++j)
    bins[static_cast<size_t>(j)] += static_cast<double>(total[static_cast<size_t>(j)]);
}

void Histogram::Grow(double new_lo, double new_hi) {
  std::vector<double> nb(kBins, 0.0);
  const double w = (hi - lo) / kBins, k = kBins / (new_hi - new_lo);
  for (int j = 0; j < kBins; ++j) {
    if (bins[static_cast<size_t>(j)] == 0) continue;
    double c = lo + (j + 0.5) * w;
    auto b = static_cast<int64_t>((c - new_lo) * k);
    nb[static_cast<size_t>(std::clamp<int64_t>(b, 0, kBins - 1))] += bins[static_cast<size_t>(j)];
  }
  bins.swap(nb);
  lo = new_lo;
  hi = new_hi;
}

namespace {

// The threshold bin (exclusive end) minimising KL(P || Q) where Q is P quantized to `levels`
// levels, with the tail beyond the threshold folded into the last kept bin.
int EntropyThreshold(const std::vector<double>& a, int levels) {
  const int n = static_cast<int>(a.size());
  if (n <= levels) return n;
  std::vector<double> suffix(static_cast<size_t>(n) + 1, 0.0);
  for (int i = n - 1; i >= 0; --i)
    suffix[static_cast<size_t>(i)] = suffix[static_cast<size_t>(i) + 1] + a[static_cast<size_t>(i)];
  int best = n;
  double best_kl = std::numeric_limits<double>::infinity();
  const int step = std::max(1, (n - levels) / 480);
  std::vector<double> p, q;
  for (int i = levels;; i = std::min(n, i + step)) {
    p.assign(a.begin(), a.begin() + i);
    p[static_cast<size_t>(i) - 1] += suffix[static_cast<size_t>(i)];
    q.assign(static_cast<size_t>(i), 0.0);
    // Merge a[0:i] into `levels` chunks; spread each chunk's mass over its non-empty bins.
    for (int c = 0; c < levels; ++c) {
      int b0 = static_cast<int>(static_cast<int64_t>(c) * i / levels);
      int b1 = static_cast<int>(static_cast<int64_t>(c + 1) * i / levels);
      // Q comes from the bins without the clipped tail, so clipping costs KL.
      double mass = 0;
      int nonzero = 0;
      for (int b = b0; b < b1; ++b) {
        mass += a[static_cast<size_t>(b)];
        if (a[static_cast<size_t>(b)] > 0) ++nonzero;
      }
      if (nonzero == 0) continue;
      for (int b = b0; b < b1; ++b)
        if (a[static_cast<size_t>(b)] > 0) q[static_cast<size_t>(b)] = mass / nonzero;
    }
    double ps = 0, qs = 0;
    for (int b = 0; b < i; ++b) {
      ps += p[static_cast<size_t>(b)];
      qs += q[static_cast<size_t>(b)];
    }
    double kl = std::numeric_limits<double>::infinity();
    if (ps > 0 && qs > 0) {
      kl = 0;
      for (int b = 0; b < i; ++b) {
        double pb = p[static_cast<size_t>(b)] / ps;
        if (pb <= 0) continue;
        double qb = q[static_cast<size_t>(b)] / qs;
        kl += qb > 0 ? pb * std::log(pb / qb) : pb * 1e3;
      }
    }
    if (kl < best_kl) {
      best_kl = kl;
      best = i;
    }
    if (i == n) break;
  }
  return best;
}

}  // namespace

std::pair<double, double> Histogram::Range(const Method& method) const {
  if (bins.empty()) return {0.0, 0.0};
  if (method.kind == Method::Kind::kMinMax) return {min, max};
  // Fold the signed histogram onto |x| over [0, A].
  const double a_max = std::max(std::fabs(lo), std::fabs(hi));
  const double w = (hi - lo) / kBins;
  std::vector<double> a(kBins, 0.0);
  double total = 0;
  for (int j = 0; j < kBins; ++j) {
    double c = std::fabs(lo + (j + 0.5) * w);
    auto b = static_cast<int64_t>(c / a_max * kBins);
    a[static_cast<size_t>(std::clamp<int64_t>(b, 0, kBins - 1))] += bins[static_cast<size_t>(j)];
    total += bins[static_cast<size_t>(j)];
  }
  int end = kBins;
  if (method.kind == Method::Kind::kPercentile) {
    double target = total * method.percentile / 100.0, cum = 0;
    for (int b = 0; b < kBins; ++b) {
      cum += a[static_cast<size_t>(b)];
      if (cum >= target) {
        end = b + 1;
        break;
      }
    }
  } else {
    end = EntropyThreshold(a, min >= 0 ? 255 : 128);
  }
  double t = a_max * end / kBins;
  return {std::max(min, -t), std::min(max, t)};
}

QParams ComputeQParams(double lo, double hi, DType type, bool symmetric) {
  lo = std::min(lo, 0.0);
  hi = std::max(hi, 0.0);
  const bool u8 = type == DType::kUint8;
  QParams q;
  if (symmetric) {
    double a = std::max(std::fabs(lo), std::fabs(hi));
    double s = a / (u8 ? 127.5 : 127.0);
    q.scale = s > 0 ? static_cast<float>(s) : 1.0f;
    q.zero_point = u8 ? 128 : 0;
    return q;
  }
  double s = (hi - lo) / 255.0;
  q.scale = s > 0 ? static_cast<float>(s) : 1.0f;
  double qmin = u8 ? 0 : -128, qmax = u8 ? 255 : 127;
  double zp = std::nearbyint(qmin - lo / static_cast<double>(q.scale));
  q.zero_point = static_cast<int32_t>(std::clamp(zp, qmin, qmax));
  return q;
}

// ---- table ----

const TensorRange* Table::Find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::string TableToJson(const Table& table) {
  nlohmann::ordered_json j;
  j["format"] = "ferry-calibration-table";
  j["version"] = 1;
  j["model"] = table.model;
  j["data"] = table.data;
  j["samples"] = table.samples;
  j["method"] = table.method.ToString();
  j["activation_type"] = DTypeName(table.activation_type);
  j["symmetric"] = table.symmetric;
  nlohmann::ordered_json ts = nlohmann::ordered_json::object();
  for (const auto& t : table.tensors) {
    nlohmann::ordered_json e;
    e["min"] = t.min;
    e["max"] = t.max;
    e["range"] = {t.lo, t.hi};
    e["scale"] = t.q.scale;
    e["zero_point"] = t.q.zero_point;
    e["method"] = table.method.ToString();
    e["values"] = t.count;
    ts[t.name] = e;
  }
  j["tensors"] = ts;
  return JsonText(j, 1) + "\n";
}

Result<Table> ParseTable(const std::string& json, const std::string& what) {
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(json);
  } catch (const std::exception& e) {
    return InvalidError("{}: not JSON ({})", what, e.what());
  }
  if (!j.is_object() || !j.contains("tensors") || !j["tensors"].is_object())
    return InvalidError("{}: not a calibration table (no \"tensors\" object)", what);
  Table t;
  try {
    if (j.contains("model")) t.model = j["model"].get<std::string>();
    if (j.contains("data")) t.data = j["data"].get<std::string>();
    if (j.contains("samples")) t.samples = j["samples"].get<int64_t>();
    if (j.contains("method")) {
      auto m = ParseMethod(j["method"].get<std::string>());
      if (!m.ok()) return InvalidError("{}: {}", what, m.status().message());
      t.method = m.value();
    }
    if (j.contains("activation_type"))
      t.activation_type =
          j["activation_type"].get<std::string>() == "int8" ? DType::kInt8 : DType::kUint8;
    if (j.contains("symmetric")) t.symmetric = j["symmetric"].get<bool>();
    for (const auto& [name, e] : j["tensors"].items()) {
      if (!e.is_object() || !e.contains("range") || !e["range"].is_array() ||
          e["range"].size() != 2 || !e["range"][0].is_number() || !e["range"][1].is_number())
        return InvalidError("{}: tensor '{}' has no \"range\": [lo, hi]", what, name);
      TensorRange r;
      r.name = name;
      r.lo = e["range"][0].get<double>();
      r.hi = e["range"][1].get<double>();
      if (!std::isfinite(r.lo) || !std::isfinite(r.hi) || r.lo > r.hi)
        return InvalidError("{}: tensor '{}' has range [{}, {}]", what, name, r.lo, r.hi);
      r.min = e.contains("min") ? e["min"].get<double>() : r.lo;
      r.max = e.contains("max") ? e["max"].get<double>() : r.hi;
      if (e.contains("values")) r.count = e["values"].get<int64_t>();
      r.q = ComputeQParams(r.lo, r.hi, t.activation_type, t.symmetric);
      t.tensors.push_back(std::move(r));
    }
  } catch (const std::exception& e) {
    return InvalidError("{}: malformed calibration table ({})", what, e.what());
  }
  return t;
}

Result<Table> ReadTable(const std::string& path) {
  auto bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status().With("--table");
  return ParseTable(bytes.value(), fmt::format("--table '{}'", path));
}

// ---- calibrator ----

void Calibrator::Observe(const std::string& name, const Value& value) {
  if (!value.is_tensor() || value.tensor().dtype() != DType::kFloat) return;
  auto it = hist_.find(name);
  if (it == hist_.end()) {
    it = hist_.emplace(name, Histogram{}).first;
    order_.push_back(name);
  }
  const Tensor& t = value.tensor();
  bytes_ += static_cast<int64_t>(t.nbytes());
  it->second.Add(t.data<float>(), t.size());
}

runtime::NodeObserver Calibrator::Observer() {
  return [this](const ir::Node&, const std::string& name, const Value& v) { Observe(name, v); };
}

Table Calibrator::Finish(const Method& method, DType type, bool symmetric) const {
  Table t;
  t.method = method;
  t.activation_type = type;
  t.symmetric = symmetric;
  for (const auto& name : order_) {
    const Histogram& h = hist_.at(name);
    if (h.bins.empty()) continue;
    TensorRange r;
    r.name = name;
    r.min = h.min;
    r.max = h.max;
    r.count = h.count;
    std::tie(r.lo, r.hi) = h.Range(method);
    r.q = ComputeQParams(r.lo, r.hi, type, symmetric);
    t.tensors.push_back(std::move(r));
  }
  return t;
}

Result<Table> RunCalibration(std::shared_ptr<const ir::Model> model,
                             std::vector<verify::DataSet> sets, const CalibrateOptions& options) {
  runtime::SessionOptions so;
  so.threads = options.threads;
  auto session = runtime::Session::Create(model, so);
  if (!session.ok()) return session.status();
  Calibrator cal;
  runtime::RunOptions ro;
  ro.observer = cal.Observer();
  const ir::Graph& graph = model->graph;
  int64_t total = 0;  // samples to run; a set that cannot be cut counts as one
  for (const auto& set : sets) {
    const int64_t n = SplittableRows(set, graph);
    total += n < 0 ? 1 : n;
  }
  if (options.max_samples > 0) total = std::min(total, options.max_samples);
  int64_t batch = std::max<int64_t>(options.batch, 0), done = 0, runs = 0;
  auto run = [&](verify::DataSet part, int64_t rows) -> Status {
    if (options.progress) options.progress(static_cast<size_t>(done), static_cast<size_t>(total));
    for (const auto& [name, v] : part.inputs) cal.Observe(name, v);
    auto outs = session.value()->Run(part.inputs, ro);
    if (!outs.ok()) return outs.status().With(fmt::format("set {}", part.name));
    done += rows;
    ++runs;
    if (batch == 0) {  // auto, after the one-sample run
      const int64_t per_sample = std::max<int64_t>(1, cal.bytes_observed() / rows);
      batch = std::clamp<int64_t>(kAutoBatchBytes / per_sample, 1, kMaxAutoBatch);
    }
    return Status::Ok();
  };
  FERRY_RETURN_IF_ERROR(ForEachRun(
      sets, graph, options.max_samples, [&] { return batch; }, run));
  if (options.progress && total > 0)
    options.progress(static_cast<size_t>(total) - 1, static_cast<size_t>(total));
  Table t = cal.Finish(options.method, options.activation_type, options.symmetric);
  t.samples = done;
  t.runs = runs;
  t.batch = std::max<int64_t>(batch, 1);
  return t;
}

Status PrepareForQuantization(ir::Model& model) {
  passes::OptimizeOptions opts;
  opts.level = "all";
  auto r = passes::Optimize(model, opts);
  return r.ok() ? Status::Ok() : r.status().With("preparing the graph (ferry optimize passes)");
}

Result<DType> ParseActivationType(const std::string& text) {
  if (text == "u8" || text == "uint8") return DType::kUint8;
  if (text == "s8" || text == "int8") return DType::kInt8;
  return UsageError("--activation-type must be u8 or s8, got '{}'", text);
}

const char* Int8TypeName(DType type) {
  return type == DType::kInt8 ? "s8" : type == DType::kUint8 ? "u8" : "?";
}

}  // namespace ferry::quant

// ferry bench MODEL [--threads N] [--runs N] [--warmup N] [--shape NAME=DIMS]...
//                   [--input NAME=FILE]... [--provider cpu|reference] [--profile] [--json]
//
// Cold start (process start -> model loaded and session created), first inference (which also
// packs weights), then `warmup` untimed runs and `runs` timed runs: min/p50/p90/p99/max,
// throughput, peak RSS, model file size. Inputs not given by --input are seeded random data:
// floats uniform in [-1, 1), integer inputs that feed a Gather's indices in [0, rows of the
// gathered table), other integers in {0, 1}, bools random.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/tensor_files.h"
#include "ir/onnx_io.h"
#include "ir/queries.h"
#include "runtime/session.h"

namespace ferry::cli {

namespace {

// The earliest instant this process can see itself: static initialisation of this file (shared
// libraries are loaded by then). Process start itself comes from /proc (10 ms ticks).
const auto kStaticInit = std::chrono::steady_clock::now();

// Milliseconds since the kernel started this process (/proc/self/stat starttime vs boot time);
// negative when unavailable.
double MsSinceProcessStart() {
  std::ifstream stat("/proc/self/stat");
  std::string content((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t rp = content.rfind(')');
  if (rp == std::string::npos) return -1;
  std::istringstream rest(content.substr(rp + 2));
  std::string field;
  // Fields after the command name start at field 3 (state); starttime is field 22.
  for (int i = 3; i < 22 && rest >> field; ++i) {
  }
  unsigned long long start_ticks = 0;
  if (!(rest >> start_ticks)) return -1;
  timespec ts{};
  if (clock_gettime(CLOCK_BOOTTIME, &ts) != 0) return -1;
  const double now_ms =
      static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  return now_ms - static_cast<double>(start_ticks) * 1e3 / hz;
}

double RssMb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::atof(line.c_str() + std::strlen(key)) / 1024.0;
  return 0;
}

// The process's peak resident set (VmHWM: per address space, so unlike getrusage's ru_maxrss it
// does not inherit the parent's peak across fork + exec).
double PeakRssMb() {
  return RssMb("VmHWM:");
}

// CPU time (user + system) the process has used, over all its threads.
double ProcessCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

struct Options {
  std::string model;
  int threads = 0, runs = 50, warmup = 5;
  std::vector<std::string> shapes, inputs;
  std::string provider = "cpu";
  bool profile = false, json = false;
};

// Upper bound (exclusive) for ids fed to graph input `name`: the row count of the embedding
// table it indexes (ir::EmbeddingRows), 2 otherwise.
int64_t IdBound(const ir::Graph& g, const std::string& name) {
  int64_t rows = ir::EmbeddingRows(g, name);
  return rows > 0 ? rows : 2;
}

Result<Tensor> RandomInput(const ir::Graph& g, const ir::ValueInfo& vi, const Shape& shape,
                           std::mt19937_64* rng) {
  const DType dt = vi.type.elem_type;
  Tensor t(dt, shape);
  const int64_t n = t.size();
  if (dt == DType::kFloat) {
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (auto& x : t.span<float>()) x = u(*rng);
  } else if (dt == DType::kDouble) {
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (auto& x : t.span<double>()) x = u(*rng);
  } else if (dt == DType::kBool) {
    for (auto& x : t.span<bool>()) x = ((*rng)() & 1) != 0;
  } else if (dt == DType::kInt64 || dt == DType::kInt32) {
    std::uniform_int_distribution<int64_t> u(0, IdBound(g, vi.name) - 1);
    for (int64_t i = 0; i < n; ++i) {
      if (dt == DType::kInt64)
        t.data<int64_t>()[i] = u(*rng);
      else
        t.data<int32_t>()[i] = static_cast<int32_t>(u(*rng));
    }
  } else {
    return UnsupportedError("input '{}': random data for dtype {} is not supported; give --input",
                            vi.name, DTypeName(dt));
  }
  return t;
}

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, k == 0 ? 0 : k - 1)];
}

int BenchCommand(const Options& o) {
  if (o.threads < 0) return ReportError(UsageError("--threads must be >= 0, got {}", o.threads));
  if (o.runs < 1) return ReportError(UsageError("--runs must be >= 1, got {}", o.runs));
  if (o.warmup < 0) return ReportError(UsageError("--warmup must be >= 0, got {}", o.warmup));
  if (o.provider != "cpu" && o.provider != "reference")
    return ReportError(UsageError("--provider must be cpu or reference, got '{}'", o.provider));
  const double rss_before = RssMb("VmRSS:");
  std::error_code ec;
  const auto file_size = std::filesystem::file_size(o.model, ec);
  auto model = ir::LoadModel(o.model);
  if (!model.ok()) return ReportError(model.status());
  std::shared_ptr<const ir::Model> shared(std::move(model).value());
  runtime::SessionOptions so;
  so.threads = o.threads;
  so.provider = o.provider;
  so.profile = o.profile;
  auto session = runtime::Session::Create(shared, so);
  if (!session.ok()) return ReportError(session.status());
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - kStaticInit)
          .count();
  const double process_ms = MsSinceProcessStart();
  const ir::Graph& g = shared->graph;

  // Inputs.
  auto parsed_shapes = ParseShapeSpecs("--shape", o.shapes);
  if (!parsed_shapes.ok()) return ReportError(parsed_shapes.status());
  std::map<std::string, Shape> shapes = parsed_shapes.value();
  std::map<std::string, std::string> files;
  for (const auto& spec : o.inputs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      return ReportError(UsageError("--input expects NAME=FILE, got '{}'", spec));
    files[spec.substr(0, eq)] = spec.substr(eq + 1);
  }
  std::vector<const ir::ValueInfo*> real = g.RealInputs();
  auto is_real = [&](const std::string& name) {
    return std::any_of(real.begin(), real.end(),
                       [&](const ir::ValueInfo* v) { return v->name == name; });
  };
  std::string names;
  for (const auto* vi : real) names += (names.empty() ? "" : ", ") + vi->name;
  for (const auto& [name, s] : shapes)
    if (!is_real(name))
      return ReportError(
          UsageError("--shape: unknown input '{}' (the model's inputs are: {})", name, names));
  for (const auto& [name, f] : files)
    if (!is_real(name))
      return ReportError(
          UsageError("--input: unknown input '{}' (the model's inputs are: {})", name, names));
  // A symbolic dim that --shape fixed for one input takes the same size in the others.
  std::map<std::string, int64_t> bound;
  for (const auto* vi : real)
    if (auto it = shapes.find(vi->name);
        it != shapes.end() && vi->type.shape && vi->type.shape->size() == it->second.size())
      for (size_t i = 0; i < it->second.size(); ++i)
        if (const auto& d = (*vi->type.shape)[i]; !d.value && !d.symbol.empty())
          bound.emplace(d.symbol, it->second[i]);
  std::mt19937_64 rng(20240601);
  nlohmann::json input_shapes = nlohmann::json::object();
  std::vector<std::pair<std::string, Value>> feeds;
  for (const auto* vi : real) {
    if (files.count(vi->name)) {
      auto v = ReadInputFile(files[vi->name], vi->type);
      if (!v.ok()) return ReportError(v.status());
      if (v->is_tensor()) input_shapes[vi->name] = v->tensor().shape();
      feeds.emplace_back(vi->name, std::move(v).value());
      continue;
    }
    if (vi->type.kind != ir::TypeInfo::Kind::kTensor)
      return ReportError(UnsupportedError("input '{}' is {}: give it with --input", vi->name,
                                          vi->type.ToString()));
    Shape shape;
    if (auto it = shapes.find(vi->name); it != shapes.end()) {
      shape = it->second;
      if (vi->type.shape) {
        const auto& decl = *vi->type.shape;
        bool ok = decl.size() == shape.size();
        for (size_t i = 0; ok && i < decl.size(); ++i)
          if (decl[i].value && *decl[i].value != shape[i]) ok = false;
        if (!ok)
          return ReportError(InvalidError("--shape {}={}: the model declares {}", vi->name,
                                          ShapeToString(shape), vi->type.ToString()));
      }
    } else {
      if (!vi->type.shape)
        return ReportError(UsageError("input '{}' has no declared shape: give --shape {}=DIMS",
                                      vi->name, vi->name));
      // Other symbolic dims are 1, as ORT's perf test and Polygraphy choose; the choice is
      // printed (stderr, so --json stays one document) and kept in the JSON's "inputs".
      std::string chosen;
      for (const auto& d : *vi->type.shape) {
        auto it = d.symbol.empty() ? bound.end() : bound.find(d.symbol);
        shape.push_back(d.value ? *d.value : it != bound.end() ? it->second : 1);
        if (!d.value)
          chosen += fmt::format("{}{}={}", chosen.empty() ? "" : ", ", d.ToString(), shape.back());
      }
      if (!chosen.empty())
        fmt::print(stderr, "note: input '{}' {}: symbolic {} (--shape {}=DIMS to choose)\n",
                   vi->name, vi->type.ToString(), chosen, vi->name);
    }
    input_shapes[vi->name] = shape;
    auto t = RandomInput(g, *vi, shape, &rng);
    if (!t.ok()) return ReportError(t.status());
    feeds.emplace_back(vi->name, Value(std::move(t).value()));
  }

  // Runs.
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  auto first = (*session)->Run(feeds);
  if (!first.ok()) return ReportError(first.status());
  const double first_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  for (int i = 0; i < o.warmup; ++i) {
    auto r = (*session)->Run(feeds);
    if (!r.ok()) return ReportError(r.status());
  }
  (*session)->ResetProfile();
  std::vector<double> times;
  const double cpu0 = ProcessCpuMs();
  auto tall = Clock::now();
  for (int i = 0; i < o.runs; ++i) {
    auto t = Clock::now();
    auto r = (*session)->Run(feeds);
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
    if (!r.ok()) return ReportError(r.status());
  }
  const double total_ms = std::chrono::duration<double, std::milli>(Clock::now() - tall).count();
  const double cpu_ms = (ProcessCpuMs() - cpu0) / o.runs;
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const double peak = PeakRssMb();
  nlohmann::json j = {
      {"model", o.model},
      {"model_mb", static_cast<double>(ec ? 0 : file_size) / (1024.0 * 1024.0)},
      {"provider", o.provider},
      {"threads", (*session)->threads()},
      {"runs", o.runs},
      {"warmup", o.warmup},
      {"load_ms", load_ms},
      {"process_start_to_load_ms", process_ms},
      {"first_ms", first_ms},
      {"min_ms", sorted.front()},
      {"p50_ms", Percentile(sorted, 0.5)},
      {"p90_ms", Percentile(sorted, 0.9)},
      {"p99_ms", Percentile(sorted, 0.99)},
      {"max_ms", sorted.back()},
      {"mean_ms", total_ms / o.runs},
      {"cpu_ms", cpu_ms},
      {"throughput", 1000.0 * o.runs / total_ms},
      {"peak_rss_mb", peak},
      {"rss_before_load_mb", rss_before},
      {"arena_mb", static_cast<double>((*session)->arena_bytes()) / (1024.0 * 1024.0)},
      {"inputs", input_shapes}};
  std::vector<runtime::NodeReport> report = (*session)->node_report();
  std::map<std::string, int> by_provider;
  for (const auto& r : report) ++by_provider[r.provider];
  j["nodes_by_provider"] = by_provider;
  nlohmann::json jnodes = nlohmann::json::array();
  std::map<std::string, std::pair<double, int>> by_op;
  if (o.profile) {
    for (const auto& r : report) {
      const double ms = r.calls ? r.total_ms / static_cast<double>(r.calls) : 0;
      jnodes.push_back({{"name", r.name},
                        {"op", r.op_type},
                        {"provider", r.provider},
                        {"fused_into", r.fused_into},
                        {"ms", ms}});
      auto& e = by_op[r.op_type + (r.provider == "cpu" ? "" : " [" + r.provider + "]")];
      e.first += ms;
      e.second += 1;
    }
    j["nodes"] = jnodes;
    nlohmann::json jops = nlohmann::json::object();
    for (const auto& [op, e] : by_op) jops[op] = {{"ms", e.first}, {"count", e.second}};
    j["ops"] = jops;
  }
  if (o.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  fmt::print("model       {} ({:.1f} MB)\n", o.model, j["model_mb"].get<double>());
  fmt::print("provider    {}, {} threads", o.provider, (*session)->threads());
  for (const auto& [p, n] : by_provider) fmt::print(", {} nodes {}", n, p);
  fmt::print("\n");
  fmt::print("cold start  {:.1f} ms load + {:.1f} ms first run\n", load_ms, first_ms);
  fmt::print("warm        {} runs: min {:.2f}  p50 {:.2f}  p90 {:.2f}  p99 {:.2f}  max {:.2f} ms\n",
             o.runs, sorted.front(), Percentile(sorted, 0.5), Percentile(sorted, 0.9),
             Percentile(sorted, 0.99), sorted.back());
  fmt::print("throughput  {:.1f} inferences/s, {:.2f} ms of CPU time per run (all threads)\n",
             1000.0 * o.runs / total_ms, cpu_ms);
  fmt::print("memory      peak RSS {:.1f} MB ({:.1f} MB before load)\n", peak, rss_before);
  if (o.profile) {
    fmt::print("\nper node (ms per run):\n");
    for (const auto& r : report) {
      const double ms = r.calls ? r.total_ms / static_cast<double>(r.calls) : 0;
      fmt::print("  {:>8.3f}  {:<18} {:<40} {}{}\n", ms, r.op_type, r.name, r.provider,
                 r.fused_into.empty() ? "" : " into " + r.fused_into);
    }
    std::vector<std::pair<double, std::string>> ops;
    double total = 0;
    for (const auto& [op, e] : by_op) {
      ops.emplace_back(e.first, fmt::format("{} x{}", op, e.second));
      total += e.first;
    }
    std::sort(ops.rbegin(), ops.rend());
    fmt::print("\nper op type (ms per run, {:.2f} total):\n", total);
    for (const auto& [ms, op] : ops)
      fmt::print("  {:>8.3f}  {:5.1f}%  {}\n", ms, total > 0 ? 100 * ms / total : 0, op);
  }
  return 0;
}

}  // namespace

void SetupBench(CLI::App& sub, Action* action) {
  auto o = std::make_shared<Options>();
  sub.add_option("model", o->model, "ONNX model file")->required();
  sub.add_option("--threads", o->threads, "Threads (default: one per core)");
  sub.add_option("--runs", o->runs, "Timed runs (default 50)");
  sub.add_option("--warmup", o->warmup, "Untimed runs after the first (default 5)");
  sub.add_option("--shape", o->shapes,
                 "NAME=DIMS (e.g. input=1x3x224x224) for symbolic dims (default 1); repeatable");
  sub.add_option("--input,-i", o->inputs,
                 "NAME=FILE (.npy or .pb) instead of random data; repeatable");
  sub.add_option("--provider", o->provider, "cpu (default) or reference");
  sub.add_flag("--profile", o->profile, "Time every node; print per node and per op type");
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.callback([o, action] { *action = [o] { return BenchCommand(*o); }; });
}

}  // namespace ferry::cli

#include "runtime/bench.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <latch>
#include <random>
#include <sstream>
#include <thread>

#include "core/float_mode.h"
#include "ir/onnx_io.h"
#include "ir/queries.h"
#include "ir/value_files.h"

namespace ferry::runtime {

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

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

// CPU time (user + system) the process has used, over all its threads.
double ProcessCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

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

using Feeds = std::vector<std::pair<std::string, Value>>;

// The feeds: files where given, else seeded random tensors of the --shape dims or the declared
// ones (symbolic dims fixed by a --shape of another input take that size, others 1, as ORT's
// perf test and Polygraphy choose; the choice is noted).
Result<Feeds> MakeFeeds(const BenchOptions& o, const ir::Graph& g, BenchResult* r) {
  std::vector<const ir::ValueInfo*> real = g.RealInputs();
  auto is_real = [&](const std::string& name) {
    return std::any_of(real.begin(), real.end(),
                       [&](const ir::ValueInfo* v) { return v->name == name; });
  };
  std::string names;
  for (const auto* vi : real) names += (names.empty() ? "" : ", ") + vi->name;
  for (const auto& [name, s] : o.shapes)
    if (!is_real(name))
      return UsageError("--shape: unknown input '{}' (the model's inputs are: {})", name, names);
  for (const auto& [name, f] : o.input_files)
    if (!is_real(name))
      return UsageError("--input: unknown input '{}' (the model's inputs are: {})", name, names);
  // A symbolic dim that --shape fixed for one input takes the same size in the others.
  std::map<std::string, int64_t> bound;
  for (const auto* vi : real)
    if (auto it = o.shapes.find(vi->name);
        it != o.shapes.end() && vi->type.shape && vi->type.shape->size() == it->second.size())
      for (size_t i = 0; i < it->second.size(); ++i)
        if (const auto& d = (*vi->type.shape)[i]; !d.value && !d.symbol.empty())
          bound.emplace(d.symbol, it->second[i]);
  std::mt19937_64 rng(20240601);
  Feeds feeds;
  for (const auto* vi : real) {
    if (auto f = o.input_files.find(vi->name); f != o.input_files.end()) {
      FERRY_ASSIGN_OR_RETURN(Value v, ir::ReadInputFile(f->second, vi->type));
      if (v.is_tensor()) r->inputs.emplace_back(vi->name, v.tensor().shape());
      feeds.emplace_back(vi->name, std::move(v));
      continue;
    }
    if (vi->type.kind != ir::TypeInfo::Kind::kTensor)
      return UnsupportedError("input '{}' is {}: give it with --input", vi->name,
                              vi->type.ToString());
    Shape shape;
    if (auto it = o.shapes.find(vi->name); it != o.shapes.end()) {
      shape = it->second;
      if (vi->type.shape) {
        const auto& decl = *vi->type.shape;
        bool ok = decl.size() == shape.size();
        for (size_t i = 0; ok && i < decl.size(); ++i)
          if (decl[i].value && *decl[i].value != shape[i]) ok = false;
        if (!ok)
          return InvalidError("--shape {}={}: the model declares {}", vi->name,
                              ShapeToString(shape), vi->type.ToString());
      }
    } else {
      if (!vi->type.shape)
        return UsageError("input '{}' has no declared shape: give --shape {}=DIMS", vi->name,
                          vi->name);
      std::string chosen;
      for (const auto& d : *vi->type.shape) {
        auto it = d.symbol.empty() ? bound.end() : bound.find(d.symbol);
        shape.push_back(d.value ? *d.value : it != bound.end() ? it->second : 1);
        if (!d.value)
          chosen += fmt::format("{}{}={}", chosen.empty() ? "" : ", ", d.ToString(), shape.back());
      }
      if (!chosen.empty())
        r->notes.push_back(fmt::format("input '{}' {}: symbolic {} (--shape {}=DIMS to choose)",
                                       vi->name, vi->type.ToString(), chosen, vi->name));
    }
    r->inputs.emplace_back(vi->name, shape);
    FERRY_ASSIGN_OR_RETURN(Tensor t, RandomInput(g, *vi, shape, &rng));
    feeds.emplace_back(vi->name, Value(std::move(t)));
  }
  return feeds;
}

// `callers` threads on `session`, each `warmup` untimed runs, then (all together) `runs` timed
// runs back to back; per-request times appended to `times`, the timed phase's wall time
// returned and its process CPU time in `cpu_ms`. The callers run in the calling thread's
// floating-point mode.
Result<double> RunConcurrent(Session& session, const Feeds& feeds, int callers, int warmup,
                             int runs, std::vector<double>* times, double* cpu_ms) {
  std::vector<std::vector<double>> per(static_cast<size_t>(callers));
  std::vector<Status> errors(static_cast<size_t>(callers));
  std::latch warmed(callers + 1);
  const uint32_t mode = GetFloatMode();
  std::vector<std::thread> threads;
  for (int c = 0; c < callers; ++c)
    threads.emplace_back([&, c] {
      SetFloatMode(mode);
      auto& mine = per[static_cast<size_t>(c)];
      Status& err = errors[static_cast<size_t>(c)];
      for (int i = 0; i < warmup && err.ok(); ++i) err = session.Run(feeds).status();
      warmed.arrive_and_wait();
      for (int i = 0; i < runs && err.ok(); ++i) {
        auto t = Clock::now();
        err = session.Run(feeds).status();
        mine.push_back(MsSince(t));
      }
    });
  warmed.arrive_and_wait();
  const double cpu0 = ProcessCpuMs();
  const Clock::time_point t0 = Clock::now();
  for (auto& t : threads) t.join();
  const double wall = MsSince(t0);
  *cpu_ms = ProcessCpuMs() - cpu0;
  for (int c = 0; c < callers; ++c) {
    if (!errors[static_cast<size_t>(c)].ok())
      return errors[static_cast<size_t>(c)].With(fmt::format("caller {} of {}", c, callers));
    times->insert(times->end(), per[static_cast<size_t>(c)].begin(),
                  per[static_cast<size_t>(c)].end());
  }
  return wall;
}

}  // namespace

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, k == 0 ? 0 : k - 1)];
}

Result<BenchResult> Bench(const BenchOptions& o) {
  const Clock::time_point start = o.start.value_or(Clock::now());
  if (o.session.threads < 0) return UsageError("--threads must be >= 0, got {}", o.session.threads);
  if (o.runs < 1) return UsageError("--runs must be >= 1, got {}", o.runs);
  if (o.warmup < 0) return UsageError("--warmup must be >= 0, got {}", o.warmup);
  if (o.concurrency < 1) return UsageError("--concurrency must be >= 1, got {}", o.concurrency);
  if (o.session.provider != "cpu" && o.session.provider != "reference")
    return UsageError("--provider must be cpu or reference, got '{}'", o.session.provider);
  if (o.session.profile && o.concurrency > 1)
    return UsageError("--profile times the nodes of one run at a time: use --concurrency 1");
  BenchResult r;
  r.model = o.model;
  r.provider = o.session.provider;
  r.runs = o.runs;
  r.warmup = o.warmup;
  r.concurrency = o.concurrency;
  r.profile = o.session.profile;
  r.rss_before_load_mb = RssMb("VmRSS:");
  std::error_code ec;
  const auto file_size = std::filesystem::file_size(o.model, ec);
  r.model_mb = static_cast<double>(ec ? 0 : file_size) / (1024.0 * 1024.0);
  FERRY_ASSIGN_OR_RETURN(auto loaded, ir::LoadModel(o.model));
  std::shared_ptr<const ir::Model> model(std::move(loaded));
  FERRY_ASSIGN_OR_RETURN(auto session, Session::Create(model, o.session));
  r.load_ms = MsSince(start);
  r.process_start_to_load_ms = MsSinceProcessStart();
  r.threads = session->threads();
  FERRY_ASSIGN_OR_RETURN(Feeds feeds, MakeFeeds(o, model->graph, &r));

  auto t0 = Clock::now();
  FERRY_RETURN_IF_ERROR(session->Run(feeds).status());
  r.first_ms = MsSince(t0);
  std::vector<double> times;
  double cpu_ms = 0;
  if (o.concurrency == 1) {
    for (int i = 0; i < o.warmup; ++i) FERRY_RETURN_IF_ERROR(session->Run(feeds).status());
    session->ResetProfile();
    const double cpu0 = ProcessCpuMs();
    auto tall = Clock::now();
    for (int i = 0; i < o.runs; ++i) {
      auto t = Clock::now();
      auto out = session->Run(feeds);
      times.push_back(MsSince(t));
      FERRY_RETURN_IF_ERROR(out.status());
    }
    r.wall_ms = MsSince(tall);
    cpu_ms = ProcessCpuMs() - cpu0;
  } else {
    FERRY_ASSIGN_OR_RETURN(r.wall_ms, RunConcurrent(*session, feeds, o.concurrency, o.warmup,
                                                    o.runs, &times, &cpu_ms));
  }
  const double total_runs = static_cast<double>(times.size());
  r.cpu_ms = cpu_ms / total_runs;
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  r.min_ms = sorted.front();
  r.p50_ms = Percentile(sorted, 0.5);
  r.p90_ms = Percentile(sorted, 0.9);
  r.p99_ms = Percentile(sorted, 0.99);
  r.max_ms = sorted.back();
  r.mean_ms = o.concurrency == 1 ? r.wall_ms / o.runs : [&] {
    double sum = 0;
    for (double t : times) sum += t;
    return sum / total_runs;
  }();
  r.throughput = 1000.0 * total_runs / r.wall_ms;
  r.peak_rss_mb = RssMb("VmHWM:");
  r.arena_mb = static_cast<double>(session->arena_bytes()) / (1024.0 * 1024.0);
  r.weights_mb = static_cast<double>(session->weights_bytes()) / (1024.0 * 1024.0);
  r.contexts = static_cast<int64_t>(session->contexts());
  r.nodes = session->node_report();
  r.run_ms = std::move(times);
  return r;
}

}  // namespace ferry::runtime

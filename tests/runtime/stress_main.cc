// ferry_stress: concurrent runs on shared sessions against serial runs, bit for bit.
//
//   ferry_stress [--callers 8] [--runs 40] [--threads 1] [--seed 1] MODEL_DIR...
//
// Each MODEL_DIR holds model.onnx and test_data_set_*/input_K.pb (the zoo layout). One session
// per model (SessionOptions::threads = --threads, cores not shared so every run gets that
// many); every set is run once serially for the expected outputs; then --callers threads each
// make --runs runs, picking (model, set) at random (seeded per caller), and compare every
// output's bytes with the serial run's. Every seventh run of a caller feeds a bad input (the
// first input with a wrong rank): it must fail, naming the input, and leave the other runs
// alone. Exit 0 when everything matched, 1 otherwise (the mismatches listed). No timing.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ir/onnx_io.h"
#include "runtime/session.h"

namespace {

using ferry::Result;
using ferry::Tensor;
using ferry::Value;
using Inputs = std::vector<std::pair<std::string, Value>>;

struct Case {
  std::string name;
  std::unique_ptr<ferry::runtime::Session> session;
  std::vector<Inputs> sets;
  std::vector<std::vector<Value>> want;
};

bool SameBits(const Value& a, const Value& b) {
  if (a.is_tensor() != b.is_tensor() || a.is_sequence() != b.is_sequence()) return false;
  auto same = [](const Tensor& x, const Tensor& y) {
    if (x.dtype() != y.dtype() || x.shape() != y.shape()) return false;
    if (x.dtype() == ferry::DType::kString) {
      for (int64_t i = 0; i < x.size(); ++i)
        if (x.data<std::string>()[i] != y.data<std::string>()[i]) return false;
      return true;
    }
    return std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0;
  };
  if (a.is_tensor()) return same(a.tensor(), b.tensor());
  if (a.sequence().size() != b.sequence().size()) return false;
  for (size_t i = 0; i < a.sequence().size(); ++i)
    if (!same(a.sequence()[i], b.sequence()[i])) return false;
  return true;
}

bool Load(const std::string& dir, int threads, Case* c) {
  namespace fs = std::filesystem;
  c->name = fs::path(dir).filename().string();
  auto model = ferry::ir::LoadModel((fs::path(dir) / "model.onnx").string());
  if (!model.ok()) {
    std::fprintf(stderr, "%s: %s\n", dir.c_str(), model.status().message().c_str());
    return false;
  }
  std::shared_ptr<const ferry::ir::Model> shared = std::move(model).value();
  ferry::runtime::SessionOptions so;
  so.threads = threads;
  so.share_cores = false;
  auto s = ferry::runtime::Session::Create(shared, so);
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", dir.c_str(), s.status().message().c_str());
    return false;
  }
  c->session = std::move(s).value();
  std::vector<fs::path> set_dirs;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      set_dirs.push_back(e.path());
  std::sort(set_dirs.begin(), set_dirs.end());
  const auto real = shared->graph.RealInputs();
  for (const fs::path& sd : set_dirs) {
    Inputs in;
    for (size_t k = 0; k < real.size(); ++k) {
      const fs::path p = sd / ("input_" + std::to_string(k) + ".pb");
      auto v = ferry::ir::ReadValuePb(p.string(), real[k]->type);
      if (!v.ok()) {
        std::fprintf(stderr, "%s: %s\n", p.c_str(), v.status().message().c_str());
        return false;
      }
      in.emplace_back(real[k]->name, std::move(v).value());
    }
    auto out = c->session->Run(in);
    if (!out.ok()) {
      std::fprintf(stderr, "%s %s: %s\n", c->name.c_str(), sd.c_str(),
                   out.status().message().c_str());
      return false;
    }
    c->sets.push_back(std::move(in));
    c->want.push_back(std::move(out).value());
  }
  if (c->sets.empty()) {
    std::fprintf(stderr, "%s: no test_data_set_*\n", dir.c_str());
    return false;
  }
  return true;
}

// The first input with one more dim (size 1) in front: a rank the model refuses.
Inputs BadInputs(const Inputs& good) {
  Inputs bad = good;
  Tensor t = bad[0].second.tensor();
  ferry::Shape s = t.shape();
  s.insert(s.begin(), 1);
  bad[0].second = Value(t.Reshaped(s));
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  int callers = 8, runs = 40, threads = 1;
  uint32_t seed = 1;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--callers")
      callers = std::stoi(next());
    else if (a == "--runs")
      runs = std::stoi(next());
    else if (a == "--threads")
      threads = std::stoi(next());
    else if (a == "--seed")
      seed = static_cast<uint32_t>(std::stoul(next()));
    else
      dirs.push_back(a);
  }
  if (dirs.empty()) {
    std::fprintf(stderr,
                 "usage: ferry_stress [--callers N] [--runs N] [--threads N] MODEL_DIR...\n");
    return 2;
  }
  std::vector<Case> cases(dirs.size());
  for (size_t i = 0; i < dirs.size(); ++i)
    if (!Load(dirs[i], threads, &cases[i])) return 2;
  std::vector<std::vector<std::string>> errors(static_cast<size_t>(callers));
  std::vector<int64_t> done(static_cast<size_t>(callers), 0);
  std::vector<std::thread> pool;
  for (int c = 0; c < callers; ++c)
    pool.emplace_back([&, c] {
      std::mt19937 gen(seed * 1000 + static_cast<uint32_t>(c));
      auto& err = errors[static_cast<size_t>(c)];
      for (int r = 0; r < runs; ++r) {
        Case& k = cases[gen() % cases.size()];
        const size_t set = gen() % k.sets.size();
        if (r % 7 == 3) {
          auto out = k.session->Run(BadInputs(k.sets[set]));
          if (out.ok() || out.status().message().find(k.sets[set][0].first) == std::string::npos)
            err.push_back(k.name + ": a bad input was not refused by name");
          continue;
        }
        auto out = k.session->Run(k.sets[set]);
        ++done[static_cast<size_t>(c)];
        if (!out.ok()) {
          err.push_back(k.name + " set " + std::to_string(set) + ": " + out.status().message());
          continue;
        }
        const auto& got = out.value();
        if (got.size() != k.want[set].size()) {
          err.push_back(k.name + ": output count differs");
          continue;
        }
        for (size_t o = 0; o < got.size(); ++o)
          if (!SameBits(got[o], k.want[set][o]))
            err.push_back(k.name + " set " + std::to_string(set) + " output " + std::to_string(o) +
                          ": differs from the serial run");
      }
    });
  for (auto& t : pool) t.join();
  size_t n_err = 0;
  int64_t n_done = 0;
  for (int c = 0; c < callers; ++c) {
    n_done += done[static_cast<size_t>(c)];
    for (const auto& e : errors[static_cast<size_t>(c)]) {
      if (n_err++ < 20) std::fprintf(stderr, "caller %d: %s\n", c, e.c_str());
    }
  }
  for (const Case& k : cases)
    std::printf("%-16s contexts %zu, weights %.1f MB, arena %.1f MB per run\n", k.name.c_str(),
                k.session->contexts(), static_cast<double>(k.session->weights_bytes()) / 1048576.0,
                static_cast<double>(k.session->arena_bytes()) / 1048576.0);
  std::printf("%lld runs by %d callers (%d thread(s) each): %zu mismatches\n",
              static_cast<long long>(n_done), callers, threads, n_err);
  return n_err == 0 ? 0 : 1;
}

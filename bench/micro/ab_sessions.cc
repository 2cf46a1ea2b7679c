// ferry_ab: in-process A/B of kernel choices on one model. Each SETTING builds its own session
// (the kernel-choice overrides set while that session prepares), then single runs of the
// sessions alternate (the order reversed every other round), so every setting sees the same
// moments of a noisy machine; prints per setting the median and best run time, the median
// against the first setting and the median of the paired per-round ratios.
//
//   build/bench/micro/ferry_ab MODEL [--threads N] [--runs R] [--shape NAME=D1,D2,..] SETTING...
//   SETTING: `default`, or comma-separated key=value from
//     grouped=own|onednn|auto          own grouped 3x3 kernel (grouped.h)
//     grouped_layout=nhwc|onednn|auto  oneDNN grouped convs on NHWC or its blocked layouts
//     dw=own|onednn|auto               own depthwise kernel (dwconv.h)
//     stem=own|onednn|auto, stem_pool=own|onednn|auto   first-layer kernels (stem.h)
//     conv_algo=auto|direct|winograd2|winograd4|gemm    3x3 stride-1 algorithm (winograd.h)
//     winograd_split=chunks|phases|auto
//     packed_gemm=packed|onednn|auto   MatMul / Gemm with a constant B (gemm_avx2.h)
// Example: ferry_ab model.onnx --threads 1 --runs 60 default grouped=onednn
// Inputs: seeded uniform [0, 1) floats (symbolic dims 1 unless --shape); float inputs only.
// Two identical settings agree within ~1-2% on the 2-vCPU VM of bench/README.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ir/onnx_io.h"
#include "ops/cpu/dwconv.h"
#include "ops/cpu/gemm_avx2.h"
#include "ops/cpu/grouped.h"
#include "ops/cpu/stem.h"
#include "ops/cpu/winograd.h"
#include "runtime/session.h"

namespace ferry {
namespace {

int Mode(const std::string& v, const char* on) {
  if (v == on) return 1;
  if (v == "onednn") return 0;
  if (v == "auto") return -1;
  std::fprintf(stderr, "ferry_ab: '%s' is not %s, onednn or auto\n", v.c_str(), on);
  std::exit(2);
}

// Applies one setting's overrides (every override reset first).
void Apply(const std::string& setting) {
  ops::cpu::SetGroupedMode(-1);
  ops::cpu::SetGroupedConvNhwc(-1);
  ops::cpu::SetDwConvMode(-1);
  ops::cpu::SetStemModeForTesting(-1);
  ops::cpu::SetStemPoolModeForTesting(-1);
  ops::cpu::SetConvAlgoOverride(ops::cpu::ConvAlgo::kAuto);
  ops::cpu::SetWinogradSplit(-1);
  ops::cpu::SetPackedGemmOverride(-1);
  if (setting == "default") return;
  std::stringstream ss(setting);
  std::string kv;
  while (std::getline(ss, kv, ',')) {
    const size_t eq = kv.find('=');
    const std::string k = kv.substr(0, eq), v = eq == std::string::npos ? "" : kv.substr(eq + 1);
    if (k == "grouped") {
      ops::cpu::SetGroupedMode(Mode(v, "own"));
    } else if (k == "grouped_layout") {
      ops::cpu::SetGroupedConvNhwc(Mode(v, "nhwc"));
    } else if (k == "dw") {
      ops::cpu::SetDwConvMode(Mode(v, "own"));
    } else if (k == "stem") {
      ops::cpu::SetStemModeForTesting(Mode(v, "own"));
    } else if (k == "stem_pool") {
      ops::cpu::SetStemPoolModeForTesting(Mode(v, "own"));
    } else if (k == "winograd_split") {
      ops::cpu::SetWinogradSplit(Mode(v == "phases" ? "onednn" : v, "chunks"));
    } else if (k == "packed_gemm") {
      ops::cpu::SetPackedGemmOverride(Mode(v, "packed"));
    } else if (k == "conv_algo") {
      const std::map<std::string, ops::cpu::ConvAlgo> algos = {
          {"auto", ops::cpu::ConvAlgo::kAuto},
          {"direct", ops::cpu::ConvAlgo::kDirect},
          {"winograd2", ops::cpu::ConvAlgo::kWinograd2},
          {"winograd4", ops::cpu::ConvAlgo::kWinograd4},
          {"gemm", ops::cpu::ConvAlgo::kGemm}};
      auto it = algos.find(v);
      if (it == algos.end()) {
        std::fprintf(stderr, "ferry_ab: unknown conv_algo '%s'\n", v.c_str());
        std::exit(2);
      }
      ops::cpu::SetConvAlgoOverride(it->second);
    } else {
      std::fprintf(stderr, "ferry_ab: unknown setting '%s'\n", kv.c_str());
      std::exit(2);
    }
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: ferry_ab MODEL [--threads N] [--runs R] [--shape NAME=D1,D2,..] "
                 "SETTING...\n");
    return 2;
  }
  const std::string path = argv[1];
  int threads = 1, runs = 40;
  std::map<std::string, Shape> shapes;
  std::vector<std::string> settings;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--threads" || a == "--runs" || a == "--shape") && i + 1 < argc) {
      const std::string v = argv[++i];
      if (a == "--threads") threads = std::atoi(v.c_str());
      if (a == "--runs") runs = std::atoi(v.c_str());
      if (a == "--shape") {
        const size_t eq = v.find('=');
        Shape s;
        std::stringstream ds(v.substr(eq + 1));
        std::string d;
        while (std::getline(ds, d, ',')) s.push_back(std::atoll(d.c_str()));
        shapes[v.substr(0, eq)] = s;
      }
    } else {
      settings.push_back(a);
    }
  }
  if (settings.empty() || runs < 1 || threads < 1) {
    std::fprintf(stderr, "ferry_ab: give at least one SETTING, --runs and --threads >= 1\n");
    return 2;
  }
  auto loaded = ir::LoadModel(path);
  if (!loaded.ok()) {
    std::fprintf(stderr, "ferry_ab: %s\n", loaded.status().message().c_str());
    return 1;
  }
  std::shared_ptr<ir::Model> model(std::move(*loaded));
  std::vector<std::pair<std::string, Value>> feeds;
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> dist(0.f, 1.f);
  for (const auto& in : model->graph.inputs) {
    bool is_init = false;
    for (const auto& init : model->graph.initializers) is_init |= init.name == in.name;
    if (is_init) continue;
    if (in.type.elem_type != DType::kFloat || !in.type.shape) {
      std::fprintf(stderr, "ferry_ab: input '%s' is not a float tensor of known rank\n",
                   in.name.c_str());
      return 1;
    }
    Shape s;
    if (shapes.count(in.name)) {
      s = shapes[in.name];
    } else {
      for (const auto& d : *in.type.shape) s.push_back(d.known() && *d.value > 0 ? *d.value : 1);
    }
    Tensor t(DType::kFloat, s);
    for (auto& x : t.span<float>()) x = dist(gen);
    feeds.emplace_back(in.name, Value(std::move(t)));
  }
  runtime::SessionOptions so;
  so.threads = threads;
  std::vector<std::unique_ptr<runtime::Session>> sessions;
  for (const std::string& setting : settings) {
    Apply(setting);
    auto s = runtime::Session::Create(model, so);
    if (!s.ok()) {
      std::fprintf(stderr, "ferry_ab: %s\n", s.status().message().c_str());
      return 1;
    }
    // Kernels are chosen when a node first runs: warm up while this setting is applied.
    for (int w = 0; w < 3; ++w) {
      auto r = (*s)->Run(feeds);
      if (!r.ok()) {
        std::fprintf(stderr, "ferry_ab: %s\n", r.status().message().c_str());
        return 1;
      }
    }
    sessions.push_back(std::move(*s));
  }
  Apply("default");
  const size_t n = sessions.size();
  std::vector<std::vector<double>> ms(n);
  for (int r = 0; r < runs; ++r) {
    for (size_t k = 0; k < n; ++k) {
      const size_t i = r % 2 == 0 ? k : n - 1 - k;
      const auto t0 = std::chrono::steady_clock::now();
      auto out = sessions[i]->Run(feeds);
      ms[i].push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (!out.ok()) return 1;
    }
  }
  std::printf("%s, %d thread(s), %d alternating runs per setting\n", path.c_str(), threads, runs);
  const double base = Median(ms[0]);
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> paired;
    for (int r = 0; r < runs; ++r) paired.push_back(ms[i][r] / ms[0][r]);
    std::printf("  %-40s median %8.3f ms  best %8.3f  vs first %.3f  paired %.3f\n",
                settings[i].c_str(), Median(ms[i]), *std::min_element(ms[i].begin(), ms[i].end()),
                Median(ms[i]) / base, Median(paired));
  }
  return 0;
}

}  // namespace
}  // namespace ferry

int main(int argc, char** argv) {
  return ferry::Main(argc, argv);
}

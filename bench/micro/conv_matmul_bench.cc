// Conv shapes of ResNet-18 and MatMul shapes of the BERT-like encoder (d_model 256, seq 128,
// FFN 1024 and 2048, 4 heads), each a one-node model run through a Session, so the numbers include
// what the runtime adds per node. Reports GFLOP/s (2 * MACs; for Winograd the direct convolution's
// MACs, i.e. effective GFLOP/s). Arguments: threads; the provider is the default (cpu) unless
// FERRY_PROVIDER=reference. The 3x3 stride-1 shapes run once per algorithm (auto = the cpu
// provider's rule, direct = oneDNN, winograd2 / winograd4 = F(2x2,3x3) / F(4x4,3x3), gemm = the
// own im2col GEMM of conv_gemm.h, AVX-512 only: elsewhere it runs direct).
#include <immintrin.h>

#include <cstdlib>
#include <random>

#include <benchmark/benchmark.h>

#include "ir/graph.h"
#include "ops/cpu/winograd.h"
#include "runtime/session.h"

namespace ferry {
namespace {

Tensor Rand(const Shape& shape, uint32_t seed) {
  Tensor t(DType::kFloat, shape);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (auto& x : t.span<float>()) x = d(gen);
  return t;
}

ir::Attribute Ints(const std::string& name, std::vector<int64_t> v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInts;
  a.ints = std::move(v);
  return a;
}

void RunModel(benchmark::State& state, std::shared_ptr<ir::Model> m,
              std::vector<std::pair<std::string, Value>> feeds, double flop,
              ops::cpu::ConvAlgo algo = ops::cpu::ConvAlgo::kAuto) {
  ops::cpu::SetConvAlgoOverride(algo);
  runtime::SessionOptions so;
  so.threads = static_cast<int>(state.range(0));
  if (const char* p = std::getenv("FERRY_PROVIDER")) so.provider = p;
  auto s = runtime::Session::Create(m, so);
  if (!s.ok()) {
    state.SkipWithError(s.status().message().c_str());
    return;
  }
  if (!(*s)->Run(feeds).ok()) {
    state.SkipWithError("run failed");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize((*s)->Run(feeds));
  ops::cpu::SetConvAlgoOverride(ops::cpu::ConvAlgo::kAuto);
  state.counters["GFLOP/s"] = benchmark::Counter(
      flop * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

// Conv NCHW, square kernel k, stride s, pad k/2, bias + Relu (the ResNet pattern); `depth` such
// convolutions in a row (each with its own weights; when c != m they alternate c -> m and m -> c),
// so the inner ones read and write the provider's activation layout as inside a model.
void BM_Conv(benchmark::State& state, int64_t c, int64_t m, int64_t hw, int64_t k, int64_t s,
             int depth = 1, ops::cpu::ConvAlgo algo = ops::cpu::ConvAlgo::kAuto) {
  auto model = std::make_shared<ir::Model>();
  model->ir_version = 8;
  model->opset_imports.push_back({"", 13});
  model->graph.inputs.push_back({"x", {}, ""});
  std::string in = "x";
  for (int d = 0; d < depth; ++d) {
    const std::string id = std::to_string(d);
    // A 1x1 pair (depth 2, c != m) runs c -> m -> c, the bottleneck's expansion and reduction.
    const int64_t ci = d % 2 == 0 ? c : m, co = d % 2 == 0 ? m : c;
    model->graph.initializers.push_back({"w" + id, Rand({co, ci, k, k}, 1 + 2 * d), ""});
    model->graph.initializers.push_back({"b" + id, Rand({co}, 2 + 2 * d), ""});
    ir::Node conv;
    conv.op_type = "Conv";
    conv.name = "conv" + id;
    conv.inputs = {in, "w" + id, "b" + id};
    conv.outputs = {"c" + id};
    conv.attributes.push_back(Ints("kernel_shape", {k, k}));
    conv.attributes.push_back(Ints("strides", {s, s}));
    conv.attributes.push_back(Ints("pads", {k / 2, k / 2, k / 2, k / 2}));
    model->graph.nodes.push_back(std::move(conv));
    ir::Node relu;
    relu.op_type = "Relu";
    relu.name = "relu" + id;
    relu.inputs = {"c" + id};
    relu.outputs = {d + 1 == depth ? "y" : "r" + id};
    in = relu.outputs[0];
    model->graph.nodes.push_back(std::move(relu));
  }
  model->graph.outputs.push_back({"y", {}, ""});
  const int64_t out = (hw + 2 * (k / 2) - k) / s + 1;
  const double flop = 2.0 * depth * static_cast<double>(m * c * k * k * out * out);
  if (depth > 1 && c != m && (depth % 2 != 0 || s != 1)) {
    state.SkipWithError("c != m needs an even depth and stride 1");
    return;
  }
  RunModel(state, model, {{"x", Value(Rand({1, c, hw, hw}, 3))}}, flop, algo);
}

// MatMul [batch..., rows, k] x [k, n] (weight constant) or x [batch..., k, n] (both inputs).
void BM_MatMul(benchmark::State& state, int64_t batch, int64_t rows, int64_t k, int64_t n,
               bool const_b) {
  auto model = std::make_shared<ir::Model>();
  model->ir_version = 8;
  model->opset_imports.push_back({"", 13});
  model->graph.inputs.push_back({"a", {}, ""});
  std::vector<std::pair<std::string, Value>> feeds = {{"a", Value(Rand({batch, rows, k}, 4))}};
  if (const_b) {
    model->graph.initializers.push_back({"b", Rand({k, n}, 5), ""});
  } else {
    model->graph.inputs.push_back({"b", {}, ""});
    feeds.emplace_back("b", Value(Rand({batch, k, n}, 5)));
  }
  ir::Node mm;
  mm.op_type = "MatMul";
  mm.name = "matmul";
  mm.inputs = {"a", "b"};
  mm.outputs = {"y"};
  model->graph.nodes.push_back(std::move(mm));
  model->graph.outputs.push_back({"y", {}, ""});
  RunModel(state, model, feeds, 2.0 * static_cast<double>(batch * rows * k * n));
}

#define CONV(name, ...) \
  BENCHMARK_CAPTURE(BM_Conv, name, __VA_ARGS__)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)
// The 3x3 stride-1 shapes, 4 in a row, under each algorithm.
#define CONV3(name, c, hw)                                                      \
  CONV(name##_x4_auto, c, c, hw, 3, 1, 4);                                      \
  CONV(name##_x4_direct, c, c, hw, 3, 1, 4, ops::cpu::ConvAlgo::kDirect);       \
  CONV(name##_x4_winograd2, c, c, hw, 3, 1, 4, ops::cpu::ConvAlgo::kWinograd2); \
  CONV(name##_x4_winograd4, c, c, hw, 3, 1, 4, ops::cpu::ConvAlgo::kWinograd4); \
  CONV(name##_x4_gemm, c, c, hw, 3, 1, 4, ops::cpu::ConvAlgo::kGemm)
CONV(resnet_stem_7x7s2_3to64_224, 3, 64, 224, 7, 2);
CONV3(resnet_l1_3x3_64_56, 64, 56);
CONV(resnet_l2_3x3s2_64to128_56, 64, 128, 56, 3, 2);
CONV3(resnet_l2_3x3_128_28, 128, 28);
CONV3(resnet_l3_3x3_256_14, 256, 14);
CONV3(resnet_l4_3x3_512_7, 512, 7);
CONV(resnet_ds_1x1s2_256to512_14, 256, 512, 14, 1, 2);
// ResNeXt-50's 1x1 convs (expansion and reduction, 4 in a row): 56x56 (the own pointwise
// kernel), 28x28 and 14x14 (oneDNN), 7x7 (the own GEMM).
CONV(resnext_1x1_128to256_56_x4, 128, 256, 56, 1, 1, 4);
CONV(resnext_1x1_256to512_28_x4, 256, 512, 28, 1, 1, 4);
CONV(resnext_1x1_512to1024_14_x4, 512, 1024, 14, 1, 1, 4);
CONV(resnext_1x1_1024to2048_7_x4, 1024, 2048, 7, 1, 1, 4);
#define MATMUL(name, batch, rows, k, n, c)                 \
  BENCHMARK_CAPTURE(BM_MatMul, name, batch, rows, k, n, c) \
      ->Arg(1)                                             \
      ->Arg(2)                                             \
      ->Unit(benchmark::kMillisecond)
MATMUL(bert_qkv_128x256x256, 1, 128, 256, 256, true);
MATMUL(bert_inproj_128x256x768, 1, 128, 256, 768, true);
MATMUL(bert_ffn1_128x256x1024, 1, 128, 256, 1024, true);
MATMUL(bert_ffn1_128x256x2048, 1, 128, 256, 2048, true);
MATMUL(bert_ffn2_128x1024x256, 1, 128, 1024, 256, true);
MATMUL(bert_ffn2_128x2048x256, 1, 128, 2048, 256, true);
MATMUL(bert_scores_4x128x64x128, 4, 128, 64, 128, false);
// ResNet-18's layer4 3x3 conv as a plain GEMM (im2col: 49 pixels x 9*512, weights 9*512 x 512):
// what oneDNN's matmul makes of the shape ConvGemm runs.
MATMUL(l4_im2col_49x4608x512, 1, 49, 4608, 512, true);
// The machine's sgemm peak, for "% of peak": a large square sgemm (oneDNN) through the same path,
MATMUL(sgemm_peak_1024x1024x1024, 1, 1024, 1024, 1024, true);

// and the FMA bound: independent FMA chains on the widest vectors the CPU has (AVX-512: 16 lanes,
// else AVX2: 8), single thread; GFLOP/s = 2 x lanes x FMAs per second.
constexpr int kChains = 12;

__attribute__((target("avx512f,avx2,fma"), noinline)) double FmaLoop512(int64_t iters) {
  __m512 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm512_set1_ps(1.f + 1e-7f * static_cast<float>(i));
  const __m512 b = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-9f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) a[i] = _mm512_fmadd_ps(a[i], b, c);
  }
  __m512 s = a[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, a[i]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  return out[0];
}

__attribute__((target("avx2,fma"), noinline)) double FmaLoop256(int64_t iters) {
  __m256 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm256_set1_ps(1.f + 1e-7f * static_cast<float>(i));
  const __m256 b = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-9f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) a[i] = _mm256_fmadd_ps(a[i], b, c);
  }
  __m256 s = a[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, a[i]);
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  return out[0];
}

void BM_FmaPeak(benchmark::State& state) {
  const bool wide = __builtin_cpu_supports("avx512f");
  const int64_t iters = 1 << 20;
  for (auto _ : state) benchmark::DoNotOptimize(wide ? FmaLoop512(iters) : FmaLoop256(iters));
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * (wide ? 16 : 8) * kChains * static_cast<double>(iters * state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
  state.SetLabel(wide ? "avx512" : "avx2");
}
BENCHMARK(BM_FmaPeak)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ferry

BENCHMARK_MAIN();

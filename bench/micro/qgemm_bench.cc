// int8 GEMM on the BERT encoder's dynamic-quantized MatMul shapes (seq 128, d_model 256, FFN
// 1024): the cpu provider's own GEMM (qgemm.h; AVX512-VNNI, or the AVX2 int16 widening path)
// against oneDNN 2.6's u8 x s8 -> s32 matmul (B reordered once; source zero point at run
// time). One thread; GOP/s = 2 * MACs. Built into ferry_micro:
//   build/bench/micro/ferry_micro --benchmark_filter=QGemm
#include <omp.h>

#include <random>
#include <vector>

#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "ops/cpu/qgemm.h"

namespace ferry {
namespace {

struct Data {
  std::vector<uint8_t> a;
  std::vector<int8_t> b;
  Data(int64_t m, int64_t k, int64_t n)
      : a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)) {
    std::mt19937 gen(7);
    std::uniform_int_distribution<int> d(0, 255);
    for (auto& x : a) x = static_cast<uint8_t>(d(gen));
    for (auto& x : b) x = static_cast<int8_t>(d(gen) - 128);
  }
};

void Rate(benchmark::State& state, int64_t m, int64_t k, int64_t n) {
  state.counters["GOP/s"] = benchmark::Counter(
      2.0 * m * k * n * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

// isa: 2 VNNI, 1 AVX2 (widening).
void BM_QGemmOwn(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  ops::cpu::SetQGemmIsaForTesting(static_cast<int>(state.range(3)));
  const ops::cpu::QIsa isa = ops::cpu::QGemmIsa();
  if (static_cast<int64_t>(isa) != state.range(3)) {
    state.SkipWithError("ISA not available");
    return;
  }
  omp_set_num_threads(1);
  Data d(m, k, n);
  ops::cpu::QPackedB pb;
  ops::cpu::QPackB(isa, d.b.data(), true, k, n, n, nullptr, false, &pb);
  std::vector<int32_t> c(static_cast<size_t>(m * n));
  const int32_t za = 117;
  ops::cpu::QOutput out;
  out.i32 = c.data();
  for (auto _ : state) {
    ops::cpu::QGemm(pb, d.a.data(), false, m, k, &za, true, out);
    benchmark::DoNotOptimize(c.data());
  }
  ops::cpu::SetQGemmIsaForTesting(-1);
  Rate(state, m, k, n);
}

void BM_QGemmOneDnn(benchmark::State& state) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  omp_set_num_threads(1);
  Data d(m, k, n);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  dnnl::memory::desc a_md({m, k}, dt::u8, tag::ab), b_any({k, n}, dt::s8, tag::any),
      b_md({k, n}, dt::s8, tag::ab), c_md({m, n}, dt::s32, tag::ab);
  dnnl::primitive_attr attr;
  attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_any, c_md), attr, eng);
  dnnl::memory b_user(b_md, eng, d.b.data()), b_mem(pd.weights_desc(), eng);
  dnnl::reorder(b_user, b_mem).execute(s, b_user, b_mem);
  std::vector<int32_t> c(static_cast<size_t>(m * n));
  int32_t za = 117;
  dnnl::memory a_mem(a_md, eng, d.a.data()), c_mem(c_md, eng, c.data());
  dnnl::memory zp_mem({{1}, dt::s32, tag::x}, eng, &za);
  dnnl::matmul mm(pd);
  state.SetLabel(pd.impl_info_str());
  for (auto _ : state) {
    mm.execute(s, {{DNNL_ARG_SRC, a_mem},
                   {DNNL_ARG_WEIGHTS, b_mem},
                   {DNNL_ARG_DST, c_mem},
                   {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp_mem}});
    s.wait();
  }
  Rate(state, m, k, n);
}

void Shapes(benchmark::internal::Benchmark* b, bool own) {
  for (auto [m, k, n] : {std::tuple<int, int, int>{128, 256, 256},
                         {128, 256, 1024},
                         {128, 1024, 256},
                         {256, 64, 128}})
    for (int isa : own ? std::vector<int>{2, 1} : std::vector<int>{0}) b->Args({m, k, n, isa});
}

BENCHMARK(BM_QGemmOwn)->Apply([](auto* b) { Shapes(b, true); }) -> Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QGemmOneDnn)
    ->Apply([](auto* b) { Shapes(b, false); }) -> Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ferry

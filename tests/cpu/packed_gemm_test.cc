// The own packed GEMM (src/ops/cpu/gemm_avx2.h) behind MatMul and Gemm with a constant 2-D B,
// against the reference kernels: awkward M / K / N (row and column tails), batch dims on A, the
// fused bias / residual / Relu / Clip epilogue, Gemm's transB and broadcast C, 1 and 2 threads.
// Each case checks that the packed path ran (PackedGemmRuns), or that oneDNN ran when forced.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"
#include "ops/cpu/gemm_avx2.h"

namespace ferry {
namespace {

using namespace cpu_test;

class ForcePacked {
 public:
  explicit ForcePacked(int v) { ops::cpu::SetPackedGemmOverride(v); }
  ~ForcePacked() { ops::cpu::SetPackedGemmOverride(-1); }
};

std::string Name(const Shape& a, int64_t k, int64_t n, int threads) {
  return ShapeToString(a) + " k" + std::to_string(k) + " n" + std::to_string(n) + " t" +
         std::to_string(threads);
}

// Runs b and checks that the packed GEMM ran (when the CPU has AVX2+FMA) or did not (force 0).
void Check(GraphBuilder& b, int threads, bool expect_packed, int64_t k) {
  const uint64_t before = ops::cpu::PackedGemmRuns();
  // Values in [-1, 1]: sums of k products, float rounding grows with k.
  const double tol = 1e-5 * (1.0 + static_cast<double>(k) / 8);
  auto report = ExpectMatchesReference(b, 1e-4, tol, threads);
  const uint64_t runs = ops::cpu::PackedGemmRuns() - before;
  if (expect_packed && ops::cpu::GemmAvx2Supported())
    EXPECT_EQ(runs, 2u);  // ExpectMatchesReference runs the cpu session twice
  else
    EXPECT_EQ(runs, 0u);
}

TEST(CpuPackedGemm, MatMulAwkwardShapesMatchReference) {
  ForcePacked force(1);
  const int64_t ms[] = {1, 5, 6, 7, 13, 128};
  const int64_t ks[] = {1, 3, 17, 256};
  const int64_t ns[] = {1, 15, 16, 17, 127, 768};
  uint32_t seed = 4100;
  int i = 0;
  for (int64_t m : ms)
    for (int64_t n : ns) {
      const int64_t k = ks[i % 4];
      const int threads = 1 + (i / 4) % 2;
      ++i;
      // Every fourth case puts A's rows behind batch dims ([2, 3, m, k]: 6m rows).
      const Shape a = i % 4 == 0 ? Shape{2, 3, m, k} : Shape{m, k};
      SCOPED_TRACE(Name(a, k, n, threads));
      GraphBuilder b;
      b.Input("a", Rand(a, seed++));
      b.Const("b", Rand({k, n}, seed++));
      b.Node("MatMul", {"a", "b"}, {"y"});
      b.Output("y");
      Check(b, threads, true, k);
    }
}

TEST(CpuPackedGemm, EveryKOnBothThreadCounts) {
  ForcePacked force(1);
  uint32_t seed = 4300;
  for (int64_t k : {1, 3, 17, 256, 600})
    for (int threads : {1, 2}) {
      const Shape a = {128, k};
      SCOPED_TRACE(Name(a, k, 127, threads));
      GraphBuilder b;
      b.Input("a", Rand(a, seed++));
      b.Const("b", Rand({k, 127}, seed++));
      b.Node("MatMul", {"a", "b"}, {"y"});
      b.Output("y");
      Check(b, threads, true, k);
    }
}

// MatMul + Add(bias [n]) or Add(residual) + Relu / Clip, fused into the packed GEMM's epilogue.
TEST(CpuPackedGemm, FusedEpilogueMatchesReference) {
  ForcePacked force(1);
  struct Case {
    Shape a;
    int64_t n;
    std::string add;  // "bias", "residual", ""
    std::string act;  // "Relu", "Clip", ""
  };
  const Case cases[] = {
      {{13, 17}, 127, "bias", ""},     {{2, 7, 256}, 33, "bias", "Relu"},
      {{128, 256}, 768, "bias", ""},   {{13, 17}, 127, "residual", "Relu"},
      {{7, 3}, 16, "residual", ""},    {{5, 256}, 17, "", "Clip"},
      {{128, 17}, 15, "bias", "Clip"}, {{3, 5, 17}, 64, "residual", "Clip"},
  };
  uint32_t seed = 4500;
  for (const Case& c : cases)
    for (int threads : {1, 2}) {
      const int64_t k = c.a.back();
      SCOPED_TRACE(c.add + " " + c.act + " " + Name(c.a, k, c.n, threads));
      GraphBuilder b;
      b.Input("x", Rand(c.a, seed++));
      b.Const("w", Rand({k, c.n}, seed++));
      b.Node("MatMul", {"x", "w"}, {"m"});
      std::string v = "m";
      Shape out = c.a;
      out.back() = c.n;
      if (c.add == "bias") {
        b.Const("bias", Rand({c.n}, seed++));
        b.Node("Add", {"m", "bias"}, {"s"});
        v = "s";
      } else if (c.add == "residual") {
        b.Input("r", Rand(out, seed++));
        b.Node("Add", {"r", "m"}, {"s"});
        v = "s";
      }
      if (c.act == "Relu") {
        b.Node("Relu", {v}, {"y"});
        v = "y";
      } else if (c.act == "Clip") {
        Tensor lo(DType::kFloat, {}), hi(DType::kFloat, {});
        lo.data<float>()[0] = -0.5f;
        hi.data<float>()[0] = 0.75f;
        b.Const("lo", std::move(lo));
        b.Const("hi", std::move(hi));
        b.Node("Clip", {v, "lo", "hi"}, {"y"});
        v = "y";
      }
      b.Output(v);
      Check(b, threads, true, k);
    }
}

// Gemm: transB, C as [n], [1, n], [m, 1], [m, n] or a scalar; transA stays on oneDNN.
TEST(CpuPackedGemm, GemmTransBAndBroadcastCMatchReference) {
  ForcePacked force(1);
  struct Case {
    int64_t m, k, n;
    bool tb;
    Shape c;  // empty: no C
    bool ta = false;
  };
  const Case cases[] = {
      {13, 17, 127, true, {127}}, {128, 256, 768, true, {768}}, {5, 3, 16, false, {1, 16}},
      {7, 256, 17, true, {7, 1}}, {6, 17, 15, false, {6, 15}},  {1, 1, 1, true, {}},
      {13, 3, 33, false, {1}},    {128, 17, 1, true, {128, 1}}, {13, 17, 20, false, {20}, true},
  };
  uint32_t seed = 4700;
  for (const Case& c : cases)
    for (int threads : {1, 2}) {
      SCOPED_TRACE(Name({c.m, c.k}, c.k, c.n, threads) + (c.tb ? " transB" : "") +
                   (c.ta ? " transA" : "") + " c" + ShapeToString(c.c));
      GraphBuilder b;
      b.Input("a", Rand(c.ta ? Shape{c.k, c.m} : Shape{c.m, c.k}, seed++));
      b.Const("b", Rand(c.tb ? Shape{c.n, c.k} : Shape{c.k, c.n}, seed++));
      std::vector<std::string> in = {"a", "b"};
      if (!c.c.empty()) {
        b.Const("c", Rand(c.c, seed++));
        in.push_back("c");
      }
      ir::Node& g = b.Node("Gemm", in, {"y"});
      if (c.tb) SetInt(g, "transB", 1);
      if (c.ta) SetInt(g, "transA", 1);
      b.Output("y");
      Check(b, threads, !c.ta, c.k);
    }
}

// A Gemm with transB, at most 4 rows of A and a constant B of 1 MiB or more reads B in place
// (GemvTransB): awkward k (tails of the 8-float steps) and n (tails of the 4 / 2 B rows per
// step, thread chunks), every broadcast C, a Relu after it, 1 and 2 threads; 5 rows is oneDNN's.
TEST(CpuGemv, LargeConstantTransBAtFewRowsMatchesReference) {
  struct Case {
    int64_t m, k, n;
    Shape c;
    bool relu;
  };
  const Case cases[] = {
      {1, 1029, 263, {263}, false}, {2, 1029, 263, {1, 263}, true}, {3, 4099, 70, {3, 70}, false},
      {4, 4099, 70, {4, 1}, true},  {1, 8, 33000, {}, false},       {4, 13, 20200, {1}, false},
      {3, 1029, 265, {265}, true},  {5, 1029, 263, {263}, false},
  };
  uint32_t seed = 5100;
  for (const Case& c : cases)
    for (int threads : {1, 2}) {
      SCOPED_TRACE(Name({c.m, c.k}, c.k, c.n, threads) + " c" + ShapeToString(c.c) +
                   (c.relu ? " relu" : ""));
      GraphBuilder b;
      b.Input("a", Rand({c.m, c.k}, seed++));
      b.Const("b", Rand({c.n, c.k}, seed++));
      std::vector<std::string> in = {"a", "b"};
      if (!c.c.empty()) {
        b.Const("c", Rand(c.c, seed++));
        in.push_back("c");
      }
      SetInt(b.Node("Gemm", in, {c.relu ? "g" : "y"}), "transB", 1);
      if (c.relu) b.Node("Relu", {"g"}, {"y"});
      b.Output("y");
      const uint64_t before = ops::cpu::GemvRuns();
      const double tol = 1e-5 * (1.0 + static_cast<double>(c.k) / 8);
      ExpectMatchesReference(b, 1e-4, tol, threads);
      const uint64_t runs = ops::cpu::GemvRuns() - before;
      EXPECT_EQ(runs, c.m <= 4 && ops::cpu::GemmAvx2Supported() ? 2u : 0u);
    }
}

// A computed B stays on oneDNN; so does everything when the override says so.
TEST(CpuPackedGemm, NonConstantBAndOverrideKeepOneDnn) {
  {
    GraphBuilder b;
    b.Input("a", Rand({2, 13, 17}, 4900));
    b.Input("b", Rand({17, 33}, 4901));
    b.Node("MatMul", {"a", "b"}, {"y"});
    b.Output("y");
    Check(b, 2, false, 17);
  }
  ForcePacked force(0);
  GraphBuilder b;
  b.Input("a", Rand({13, 17}, 4902));
  b.Const("b", Rand({17, 33}, 4903));
  b.Node("MatMul", {"a", "b"}, {"y"});
  b.Output("y");
  Check(b, 2, false, 17);
}

// One row (a GEMV at batch 1) runs several panels at once (RowPanels): each output must be
// bit-identical to the same row computed inside a 7-row product, for K over one and several K
// blocks, panel counts that are and are not multiples of four, with the bias + Relu epilogue.
TEST(CpuPackedGemm, OneRowBitIdenticalToItsRowInABatch) {
  if (!ops::cpu::GemmAvx2Supported()) GTEST_SKIP() << "no AVX2+FMA";
  uint32_t seed = 5100;
  for (int64_t k : {5, 128, 600})
    for (int64_t n : {16, 127, 512, 520}) {
      SCOPED_TRACE("k " + std::to_string(k) + " n " + std::to_string(n));
      Tensor a = Rand({7, k}, seed++), w = Rand({n, k}, seed++), bias = Rand({n}, seed++);
      ops::cpu::PackedB pb;
      pb.Pack(w.data<float>(), k, n, /*trans=*/true);
      ops::cpu::GemmEpilogue e;
      e.bias = bias.data<float>();
      e.bias_cs = 1;
      e.act = ops::cpu::GemmEpilogue::Act::kRelu;
      std::vector<float> all(7 * n), one(n);
      ops::cpu::PackedGemm(a.data<float>(), 7, k, pb, all.data(), e, 1);
      for (int64_t r = 0; r < 7; ++r) {
        ops::cpu::PackedGemm(a.data<float>() + r * k, 1, k, pb, one.data(), e, 1 + r % 2);
        for (int64_t j = 0; j < n; ++j)
          ASSERT_EQ(one[j], all[r * n + j]) << "row " << r << " col " << j;
      }
    }
}

// The shared microkernel on its own: rows 1..6, cols 1..16, accumulate or overwrite.
TEST(CpuPackedGemm, MicrokernelTailsMatchScalar) {
  if (!ops::cpu::GemmAvx2Supported()) GTEST_SKIP() << "no AVX2+FMA";
  const int64_t k = 19, lda = 23, ldc = 21;
  Tensor a = Rand({6, lda}, 5000), bp = Rand({k, 16}, 5001);
  for (int rows = 1; rows <= 6; ++rows)
    for (int cols : {1, 7, 8, 9, 16})
      for (bool acc : {false, true}) {
        Tensor c = Rand({6, ldc}, 5002);
        std::vector<float> want(c.data<float>(), c.data<float>() + 6 * ldc);
        for (int r = 0; r < rows; ++r)
          for (int j = 0; j < cols; ++j) {
            double s = acc ? want[r * ldc + j] : 0.0;
            for (int64_t i = 0; i < k; ++i)
              s += double{a.data<float>()[r * lda + i]} * bp.data<float>()[i * 16 + j];
            want[r * ldc + j] = static_cast<float>(s);
          }
        ops::cpu::GemmTile6x16(a.data<float>(), lda, bp.data<float>(), k, c.data<float>(), ldc,
                               rows, cols, acc);
        for (int64_t i = 0; i < 6 * ldc; ++i)
          EXPECT_NEAR(c.data<float>()[i], want[i], 1e-5)
              << "rows " << rows << " cols " << cols << " acc " << acc << " at " << i;
      }
}

}  // namespace
}  // namespace ferry

// cpu int8 MatMul kernels (src/ops/cpu/qmatmul.cc, qgemm.cc) against the reference kernels,
// bit for bit: DynamicQuantizeLinear, MatMulInteger, QLinearMatMul and the dynamic-quantized
// chain pattern, on both GEMM paths (AVX512-VNNI where the CPU has it, and the AVX2 widening
// path forced), seeded awkward shapes, extreme zero points and the u8 x s8 pair sums that
// saturate vpmaddubsw.
#include <cstring>
#include <limits>

#include "cpu/cpu_harness.h"
#include "ops/cpu/qgemm.h"

namespace ferry::cpu_test {
namespace {

using ops::cpu::QGemmIsa;
using ops::cpu::QIsa;
using ops::cpu::SetQGemmIsaForTesting;
using ops::cpu::SetQGemmOneDnnForTesting;

Tensor RandInt(DType dt, const Shape& shape, uint32_t seed, int lo, int hi) {
  Tensor t(dt, shape);
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  for (int64_t i = 0; i < t.size(); ++i) {
    if (dt == DType::kUint8)
      t.data<uint8_t>()[i] = static_cast<uint8_t>(d(gen));
    else
      t.data<int8_t>()[i] = static_cast<int8_t>(d(gen));
  }
  return t;
}
int Lo(DType dt) {
  return dt == DType::kUint8 ? 0 : -128;
}
int Hi(DType dt) {
  return dt == DType::kUint8 ? 255 : 127;
}
Tensor Fill(DType dt, const Shape& shape, int v) {
  Tensor t(dt, shape);
  for (int64_t i = 0; i < t.size(); ++i) {
    if (dt == DType::kUint8)
      t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
    else
      t.data<int8_t>()[i] = static_cast<int8_t>(v);
  }
  return t;
}
Tensor Scalar(float v) {
  Tensor t(DType::kFloat, {});
  t.data<float>()[0] = v;
  return t;
}

std::string ProviderOf(const std::vector<runtime::NodeReport>& report, const std::string& op) {
  std::string p;
  for (const auto& r : report)
    if (r.op_type == op) p = r.provider;
  return p;
}
int CountFused(const std::vector<runtime::NodeReport>& report) {
  int fused = 0;
  for (const auto& r : report) fused += r.provider == "fused";
  return fused;
}

// Runs `body` once per GEMM path this CPU has: oneDNN's int8 matmul where it is used (VNNI
// CPUs), the own VNNI kernel, and the own AVX2 widening path (forced below VNNI).
template <typename F>
void ForEachIsa(F&& body) {
  const QIsa best = QGemmIsa();
  if (best == QIsa::kNone) GTEST_SKIP() << "no AVX2: the int8 kernels decline";
  for (int mode = 0; mode < 3; ++mode) {
    const QIsa isa = mode == 2 ? QIsa::kAvx2 : QIsa::kAvx512Vnni;
    if (static_cast<int>(isa) > static_cast<int>(best)) continue;
    SetQGemmIsaForTesting(static_cast<int>(isa));
    SetQGemmOneDnnForTesting(mode == 0);
    if (mode == 0 && !ops::cpu::QGemmUseOneDnn()) continue;
    SCOPED_TRACE(mode == 0 ? "onednn" : mode == 1 ? "own avx512-vnni" : "own avx2");
    body();
  }
  SetQGemmIsaForTesting(-1);
  SetQGemmOneDnnForTesting(true);
}

TEST(CpuInt8, MatMulIntegerMatchesReferenceBitExact) {
  ForEachIsa([] {
    uint32_t seed = 100;
    const int64_t dims[] = {1, 3, 13, 127};
    for (DType at : {DType::kUint8, DType::kInt8})
      for (DType bt : {DType::kInt8, DType::kUint8})
        for (int64_t m : dims)
          for (int64_t k : dims)
            for (int64_t n : {int64_t{1}, int64_t{13}, int64_t{127}}) {
              const int zp_mode = static_cast<int>(seed % 4);  // none, low, high, per row/col
              SCOPED_TRACE(std::string(DTypeName(at)) + "x" + std::string(DTypeName(bt)) + " " +
                           std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n) +
                           " zp " + std::to_string(zp_mode));
              GraphBuilder b;
              b.Opset(13);
              b.Input("a", RandInt(at, {m, k}, seed, Lo(at), Hi(at)));
              const bool b_const = seed % 3 != 0;
              Tensor w = RandInt(bt, {k, n}, seed + 1, Lo(bt), Hi(bt));
              if (b_const)
                b.Const("b", std::move(w));
              else
                b.Input("b", std::move(w));
              std::vector<std::string> ins = {"a", "b"};
              if (zp_mode > 0) {
                Tensor az = zp_mode == 3 ? RandInt(at, {m}, seed + 2, Lo(at), Hi(at))
                                         : Fill(at, {}, zp_mode == 1 ? Lo(at) : Hi(at));
                Tensor bz = zp_mode == 3 ? RandInt(bt, {n}, seed + 3, Lo(bt), Hi(bt))
                                         : Fill(bt, {}, zp_mode == 1 ? Hi(bt) : Lo(bt));
                b.Const("az", std::move(az));
                b.Const("bz", std::move(bz));
                ins.push_back("az");
                ins.push_back("bz");
              }
              ++seed;
              b.Node("MatMulInteger", ins, {"y"});
              b.Output("y");
              auto report = ExpectMatchesReference(b, 0, 0);
              EXPECT_EQ(ProviderOf(report, "MatMulInteger"), "cpu");
            }
  });
}

TEST(CpuInt8, MatMulIntegerSaturatingPairsAndInt32WrapAreExact) {
  // 255 x -128 + 255 x -128 = -65280 does not fit int16 (vpmaddubsw would saturate to -32768);
  // K = 70001 makes the sum wrap around int32 as the reference's does.
  ForEachIsa([] {
    for (int64_t k : {int64_t{2}, int64_t{127}, int64_t{70001}}) {
      SCOPED_TRACE(k);
      GraphBuilder b;
      b.Input("a", Fill(DType::kUint8, {3, k}, 255));
      b.Const("b", Fill(DType::kInt8, {k, 17}, -128));
      b.Node("MatMulInteger", {"a", "b"}, {"y"});
      b.Output("y");
      auto report = ExpectMatchesReference(b, 0, 0);
      EXPECT_EQ(ProviderOf(report, "MatMulInteger"), "cpu");
    }
    // Signed A at -128 with zero point 127, unsigned B at 255 with zero point 0.
    GraphBuilder b;
    b.Input("a", Fill(DType::kInt8, {5, 130}, -128));
    b.Const("b", Fill(DType::kUint8, {130, 9}, 255));
    b.Const("az", Fill(DType::kInt8, {}, 127));
    b.Const("bz", Fill(DType::kUint8, {}, 0));
    b.Node("MatMulInteger", {"a", "b", "az", "bz"}, {"y"});
    b.Output("y");
    EXPECT_EQ(ProviderOf(ExpectMatchesReference(b, 0, 0), "MatMulInteger"), "cpu");
  });
}

TEST(CpuInt8, MatMulIntegerBatchedAndBroadcast) {
  ForEachIsa([] {
    const std::pair<Shape, Shape> shapes[] = {
        {{2, 3, 13, 7}, {3, 7, 5}},    {{13, 7}, {2, 7, 19}},
        {{2, 1, 3, 9}, {1, 4, 9, 17}}, {{9}, {9, 33}},
        {{4, 1, 8}, {8, 3}},
    };
    uint32_t seed = 300;
    for (const auto& [as, bs] : shapes) {
      SCOPED_TRACE(ShapeToString(as) + " x " + ShapeToString(bs));
      GraphBuilder b;
      b.Input("a", RandInt(DType::kUint8, as, seed++, 0, 255));
      b.Const("b", RandInt(DType::kInt8, bs, seed++, -128, 127));
      b.Const("az", Fill(DType::kUint8, {}, 201));
      b.Node("MatMulInteger", {"a", "b", "az"}, {"y"});
      b.Output("y");
      EXPECT_EQ(ProviderOf(ExpectMatchesReference(b, 0, 0), "MatMulInteger"), "cpu");
    }
  });
}

TEST(CpuInt8, DynamicQuantizeLinearMatchesReferenceBitExact) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    Shape shape;
    float lo, hi;
    std::vector<std::pair<int64_t, float>> pokes;
  };
  const Case cases[] = {
      {{1}, -1.f, 1.f, {}},
      {{13}, 0.5f, 3.f, {}},      // all positive: min is 0
      {{127}, -7.f, -0.25f, {}},  // all negative: max is 0
      {{3, 127}, -1.f, 1.f, {{5, nan}, {200, -0.f}}},
      {{2, 13, 256}, -4.f, 9.f, {{0, 2.5f}, {1, -2.5f}}},
      {{70001}, -3.f, 3.f, {{69999, nan}, {65536, 100.f}}},  // two chunks
      {{37}, 0.f, 0.f, {}},                                  // all zero: scale 0
      {{41}, -1.f, 1.f, {{3, inf}}},
      {{41}, -1.f, 1.f, {{3, -inf}, {7, inf}}},
  };
  uint32_t seed = 500;
  for (const Case& c : cases) {
    SCOPED_TRACE(ShapeToString(c.shape));
    Tensor x = Rand(c.shape, seed++, c.lo, c.hi);
    for (auto [i, v] : c.pokes) x.data<float>()[i] = v;
    // Exact halves: x / scale lands on .5 for some elements (round half to even).
    GraphBuilder b;
    b.Input("x", std::move(x));
    b.Node("DynamicQuantizeLinear", {"x"}, {"y", "s", "z"});
    b.Output("y").Output("s").Output("z");
    EXPECT_EQ(ProviderOf(ExpectMatchesReference(b, 0, 0), "DynamicQuantizeLinear"), "cpu");
  }
}

TEST(CpuInt8, QLinearMatMulMatchesReferenceBitExact) {
  ForEachIsa([] {
    uint32_t seed = 700;
    for (DType at : {DType::kUint8, DType::kInt8})
      for (DType bt : {DType::kInt8, DType::kUint8})
        for (DType yt : {DType::kUint8, DType::kInt8})
          for (auto [m, k, n] :
               {std::tuple<int64_t, int64_t, int64_t>{1, 3, 13}, {13, 127, 3}, {127, 13, 127}}) {
            SCOPED_TRACE(std::string(DTypeName(at)) + std::string(DTypeName(bt)) +
                         std::string(DTypeName(yt)) + " " + std::to_string(m) + "x" +
                         std::to_string(k) + "x" + std::to_string(n));
            const bool per = seed % 2 == 0;
            GraphBuilder b;
            b.Input("a", RandInt(at, {m, k}, seed, Lo(at), Hi(at)));
            b.Const("as", per ? Rand({m}, seed + 1, 0.001f, 0.05f) : Scalar(0.02f));
            b.Const("az", Fill(at, {}, per ? Hi(at) : Lo(at) + 3));
            b.Const("b", RandInt(bt, {k, n}, seed + 2, Lo(bt), Hi(bt)));
            b.Const("bs", per ? Rand({n}, seed + 3, 0.001f, 0.05f) : Scalar(0.01f));
            b.Const("bz", per ? RandInt(bt, {n}, seed + 4, Lo(bt), Hi(bt)) : Fill(bt, {}, 0));
            b.Const("ys", Scalar(0.03f));
            b.Const("yz", Fill(yt, {}, Lo(yt) + 100));
            ++seed;
            b.Node("QLinearMatMul", {"a", "as", "az", "b", "bs", "bz", "ys", "yz"}, {"y"});
            b.Output("y");
            EXPECT_EQ(ProviderOf(ExpectMatchesReference(b, 0, 0), "QLinearMatMul"), "cpu");
          }
  });
}

// What `ferry quantize --mode dynamic` writes for X·W (+ bias), W [k, n] per tensor or per
// column: one DynamicQuantizeLinear per activation, shared by `heads` MatMulIntegers.
GraphBuilder DynamicChain(const Shape& x, int64_t n, int heads, bool per_col, int bias,
                          uint32_t seed) {
  GraphBuilder b;
  b.Opset(13);
  const int64_t k = x.back();
  b.Input("x", Rand(x, seed, -2.f, 3.f));
  b.Node("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"});
  for (int h = 0; h < heads; ++h) {
    const std::string p = "h" + std::to_string(h) + "_";
    b.Const(p + "w", RandInt(DType::kInt8, {k, n}, seed + 10 * h + 1, -127, 127));
    b.Const(p + "ws", per_col ? Rand({n}, seed + 10 * h + 2, 1e-3f, 1e-2f) : Scalar(0.0071f));
    b.Node("MatMulInteger", {"xq", p + "w", "xz"}, {p + "mi"});
    SetInt(b.Node("Cast", {p + "mi"}, {p + "mf"}), "to", 1);
    b.Node("Mul", {"xs", p + "ws"}, {p + "sc"});
    b.Node("Mul", {p + "mf", p + "sc"}, {p + "prod"});
    if (bias == 1) {  // a constant row bias: absorbed
      b.Const(p + "bias", Rand({n}, seed + 10 * h + 3));
      b.Node("Add", {p + "bias", p + "prod"}, {p + "y"});
    } else if (bias == 2) {  // a residual (activation): not absorbed
      Shape rs(x.begin(), x.end() - 1);
      rs.push_back(n);
      b.Input(p + "res", Rand(rs, seed + 10 * h + 4));
      b.Node("Add", {p + "prod", p + "res"}, {p + "y"});
    } else {
      b.Node("Identity", {p + "prod"}, {p + "y"});
    }
    b.Output(p + "y");
  }
  return b;
}

TEST(CpuInt8, DynamicChainIsOneKernelBitExact) {
  ForEachIsa([] {
    uint32_t seed = 900;
    for (const Shape& x : {Shape{1, 13}, Shape{3, 127}, Shape{2, 13, 64}, Shape{127, 1}})
      for (int64_t n : {1, 13, 127})
        for (int bias = 0; bias <= 2; ++bias) {
          const bool per_col = seed % 2 == 0;
          SCOPED_TRACE(ShapeToString(x) + " n " + std::to_string(n) + " bias " +
                       std::to_string(bias) + (per_col ? " per column" : " per tensor"));
          GraphBuilder b = DynamicChain(x, n, 3, per_col, bias, seed);
          seed += 40;
          auto report = ExpectMatchesReference(b, 0, 0);
          // Per head: Cast, both Muls (and the Add when it is a constant bias) fused.
          EXPECT_EQ(CountFused(report), 3 * (bias == 1 ? 4 : 3));
          EXPECT_EQ(ProviderOf(report, "MatMulInteger"), "cpu (DynamicMatMul)");
          EXPECT_EQ(ProviderOf(report, "DynamicQuantizeLinear"), "cpu");
        }
  });
}

}  // namespace
}  // namespace ferry::cpu_test

namespace ferry::cpu_test {
namespace {

// ONNX Runtime's quantize_dynamic order: the scale product Mul(a_scale, b_scale) comes before
// MatMulInteger. The pattern then reads the product (the Mul runs on its own); a [1, n] bias.
TEST(CpuInt8, DynamicChainWithScaleMulFirst) {
  ForEachIsa([] {
    uint32_t seed = 1300;
    for (int64_t n : {1, 17, 64}) {
      SCOPED_TRACE(n);
      GraphBuilder b;
      b.Opset(13);
      b.Input("x", Rand({5, 3, 40}, seed, -1.f, 4.f));
      b.Const("w", RandInt(DType::kInt8, {40, n}, seed + 1, -128, 127));
      b.Const("ws", Rand({n}, seed + 2, 1e-3f, 1e-2f));
      b.Const("bias", Rand({1, n}, seed + 3));
      seed += 10;
      b.Node("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"});
      b.Node("Mul", {"xs", "ws"}, {"sc"});
      b.Node("MatMulInteger", {"xq", "w", "xz"}, {"mi"});
      SetInt(b.Node("Cast", {"mi"}, {"mf"}), "to", 1);
      b.Node("Mul", {"sc", "mf"}, {"prod"});
      b.Node("Add", {"prod", "bias"}, {"y"});
      b.Output("y");
      auto report = ExpectMatchesReference(b, 0, 0);
      EXPECT_EQ(CountFused(report), 3);  // Cast, Mul, Add
      EXPECT_EQ(ProviderOf(report, "MatMulInteger"), "cpu (DynamicMatMul)");
    }
  });
}

}  // namespace
}  // namespace ferry::cpu_test

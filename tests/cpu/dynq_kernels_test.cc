// cpu kernels of ONNX Runtime's dynamic-quantized models against the reference kernels, bit for
// bit, on both int8 GEMM paths (AVX512-VNNI where the CPU has it, the AVX2 widening path forced):
// ConvInteger (qlinear_conv.cc: uint8 / int8 X and W, scalar and per-channel weight zero points,
// the input zero point fed at run time, strides and pads) and com.microsoft DynamicQuantizeLSTM
// (dynq_lstm.cc: forward, reverse, bidirectional, batch 1 and 3, bias, peepholes, initial
// states, sequence_lens, zero points per column; bit for bit with the reference's gates, within
// tolerance with the vectorized ones), plus the integer Add (logic.cc) the quantizer
// writes after ConvInteger.
#include <random>

#include "cpu/cpu_harness.h"
#include "ops/cpu/families.h"
#include "ops/cpu/qgemm.h"

namespace ferry::cpu_test {
namespace {

using ops::cpu::QGemmIsa;
using ops::cpu::QIsa;

constexpr const char* kMs = "com.microsoft";

Tensor Q8(DType dt, const Shape& shape, uint32_t seed, int lo, int hi) {
  return dt == DType::kUint8 ? RandInts<uint8_t>(dt, shape, lo, hi, seed)
                             : RandInts<int8_t>(dt, shape, lo, hi, seed);
}

template <typename F>
void ForEachIsa(F&& body) {
  const QIsa best = QGemmIsa();
  if (best == QIsa::kNone) GTEST_SKIP() << "no AVX2: the int8 kernels decline";
  for (QIsa isa : {QIsa::kAvx512Vnni, QIsa::kAvx2}) {
    if (static_cast<int>(isa) > static_cast<int>(best)) continue;
    ops::cpu::SetQGemmIsaForTesting(static_cast<int>(isa));
    SCOPED_TRACE(isa == QIsa::kAvx2 ? "avx2" : "avx512-vnni");
    body();
  }
  ops::cpu::SetQGemmIsaForTesting(-1);
}

TEST(CpuDynQ, ConvIntegerMatchesReferenceBitExact) {
  struct Case {
    DType xt, wt;
    int64_t n, c, h, w, m, k, stride, pad;
    bool per_channel, bias_add;
  };
  const Case cases[] = {
      {DType::kUint8, DType::kUint8, 1, 1, 17, 23, 24, 3, 2, 1, false, true},  // ddddocr's first
      {DType::kUint8, DType::kUint8, 2, 24, 9, 13, 48, 1, 1, 0, false, true},
      {DType::kUint8, DType::kInt8, 1, 19, 11, 7, 33, 3, 1, 1, true, false},
      {DType::kInt8, DType::kInt8, 2, 5, 8, 8, 7, 3, 2, 0, true, false},
      {DType::kInt8, DType::kUint8, 1, 64, 4, 30, 96, 3, 1, 1, false, true},
  };
  ForEachIsa([&] {
    uint32_t seed = 3;
    for (const Case& c : cases) {
      GraphBuilder b;
      b.Input("x", Q8(c.xt, {c.n, c.c, c.h, c.w}, seed++, c.xt == DType::kUint8 ? 0 : -128,
                      c.xt == DType::kUint8 ? 255 : 127));
      b.Const("w", Q8(c.wt, {c.m, c.c, c.k, c.k}, seed++, c.wt == DType::kUint8 ? 0 : -128,
                      c.wt == DType::kUint8 ? 255 : 127));
      b.Input("xz", Q8(c.xt, {}, seed++, c.xt == DType::kUint8 ? 0 : -128,
                       c.xt == DType::kUint8 ? 255 : 127));
      b.Const("wz", Q8(c.wt, c.per_channel ? Shape{c.m} : Shape{}, seed++, -5, 120));
      ir::Node& n = b.Node("ConvInteger", {"x", "w", "xz", "wz"}, {"y"});
      SetInts(n, "kernel_shape", {c.k, c.k});
      SetInts(n, "strides", {c.stride, c.stride});
      SetInts(n, "pads", {c.pad, c.pad, c.pad, c.pad});
      std::string y = "y";
      if (c.bias_add) {  // the quantizer's int32 bias: Add [1, M, 1, 1]
        b.Const("bias", RandInts<int32_t>(DType::kInt32, {1, c.m, 1, 1}, -1000, 1000, seed++));
        b.Node("Add", {"y", "bias"}, {"ya"});
        y = "ya";
      }
      b.Output(y);
      const auto report = ExpectMatchesReference(b, 0, 0);
      EXPECT_EQ(ProviderOfOp(report, "ConvInteger"), "cpu");
      if (c.bias_add) {
        EXPECT_EQ(ProviderOfOp(report, "Add"), "cpu");
      }
    }
  });
}

TEST(CpuDynQ, DynamicQuantizeLstmMatchesReferenceBitExact) {
  struct Case {
    const char* dir;
    int64_t seq, batch, input, hidden;
    DType wt;
    bool per_col, extras;
  };
  const Case cases[] = {
      {"bidirectional", 7, 1, 24, 16, DType::kInt8, false, true},
      {"forward", 5, 3, 9, 13, DType::kUint8, true, true},
      {"reverse", 4, 2, 16, 8, DType::kInt8, true, false},
      {"bidirectional", 6, 1, 33, 32, DType::kInt8, false, false},
  };
  ForEachIsa([&] {
    uint32_t seed = 50;
    for (const Case& c : cases) {
      const int64_t d = std::string(c.dir) == "bidirectional" ? 2 : 1, g4 = 4 * c.hidden;
      const int lo = c.wt == DType::kUint8 ? 0 : -128, hi = c.wt == DType::kUint8 ? 255 : 127;
      GraphBuilder b;
      auto m = std::const_pointer_cast<ir::Model>(b.model());
      m->opset_imports.push_back({kMs, 1});
      b.Input("x", Rand({c.seq, c.batch, c.input}, seed++, -2.f, 2.f));
      b.Const("w", Q8(c.wt, {d, c.input, g4}, seed++, lo, hi));
      b.Const("r", Q8(c.wt, {d, c.hidden, g4}, seed++, lo, hi));
      const Shape ps = c.per_col ? Shape{d, g4} : Shape{d};
      b.Const("ws", Rand(ps, seed++, 0.001f, 0.02f));
      b.Const("wz", Q8(c.wt, ps, seed++, lo / 4, hi / 4));
      b.Const("rs", Rand(ps, seed++, 0.001f, 0.02f));
      b.Const("rz", Q8(c.wt, ps, seed++, lo / 4, hi / 4));
      std::vector<std::string> in = {"x", "w", "r", "", "", "", "", "", "ws", "wz", "rs", "rz"};
      if (c.extras) {
        b.Const("b", Rand({d, 8 * c.hidden}, seed++));
        b.Const("p", Rand({d, 3 * c.hidden}, seed++));
        b.Input("h0", Rand({d, c.batch, c.hidden}, seed++));
        b.Input("c0", Rand({d, c.batch, c.hidden}, seed++));
        Tensor lens(DType::kInt32, {c.batch});
        for (int64_t i = 0; i < c.batch; ++i)
          lens.data<int32_t>()[i] = static_cast<int32_t>(c.seq - (i % 2) * 2);
        b.Const("lens", std::move(lens));
        in[3] = "b", in[4] = "lens", in[5] = "h0", in[6] = "c0", in[7] = "p";
      }
      ir::Node& n = b.Node("DynamicQuantizeLSTM", in, {"y", "yh", "yc"});
      n.domain = kMs;
      SetInt(n, "hidden_size", c.hidden);
      ir::Attribute a;
      a.name = "direction";
      a.type = ir::AttrType::kString;
      a.s = c.dir;
      n.attributes.push_back(std::move(a));
      b.Output("y").Output("yh").Output("yc");
      // The reference's gates: bit for bit. vec.h's (the default): within float tolerance (a
      // hidden value's uint8 code may flip by one: 1 / 255 of its range).
      ops::cpu::SetDqLstmExactGatesForTesting(1);
      const auto report = ExpectMatchesReference(b, 0, 0);
      EXPECT_EQ(ProviderOfOp(report, "DynamicQuantizeLSTM"), "cpu");
      ops::cpu::SetDqLstmExactGatesForTesting(0);
      ExpectMatchesReference(b, 0.05, 0.05);
      ops::cpu::SetDqLstmExactGatesForTesting(-1);
    }
  });
}

}  // namespace
}  // namespace ferry::cpu_test

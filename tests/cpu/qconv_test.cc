// The cpu provider's int8 path for static QDQ models (src/ops/cpu/qconv.cc): the QConv pattern
// (DequantizeLinear -> Conv -> [Relu] -> QuantizeLinear on oneDNN int8) bit for bit against the
// reference QLinearConv on the same integers, and QuantizeLinear / DequantizeLinear against their
// reference kernels.
#include <algorithm>
#include <cstdint>
#include <random>

#include "cpu/cpu_harness.h"

namespace ferry::cpu_test {
namespace {

struct QCase {
  int64_t n, c, h, w, oc, kh, kw, group = 1;
  int64_t stride = 1, pad = 0, pad_end = -1, dil = 1;
  DType xt = DType::kUint8, yt = DType::kUint8;
  int32_t x_zp = 0, y_zp = 0;
  bool per_channel = true, relu = false, bias = true;
  int wmax = 127;  // |w| <= wmax
  float mult = 0;  // > 0: every multiplier exactly this (x_scale = mult, w_scale = y_scale = 1)
  int chain = 1;   // 2: a second QConv (3x3, pad 1) reads the first one's output
  bool weights_first = false;  // DequantizeLinear of W and B before x's (as ferry quantize writes)
  uint32_t seed = 1;
};

struct Layer {
  Tensor wq, ws, wz, bq, bs;
  float ys = 1;
  int64_t oc, kh, kw, group, stride, pad, pad_end, dil;
};

// Adds one DQ -> Conv -> [Relu] -> Q chain reading `xq` (with x_scale `xs`, zero point name `xz`)
// to the QDQ graph and one QLinearConv to the reference graph; returns the output names.
void AddLayer(GraphBuilder& qdq, GraphBuilder& ref, const QCase& k, const Layer& l, int idx,
              const std::string& xq, const std::string& xs, const std::string& xz,
              const std::string& yq, float y_scale) {
  const std::string p = "l" + std::to_string(idx) + "_";
  for (GraphBuilder* b : {&qdq, &ref}) {
    b->Const(p + "wq", l.wq).Const(p + "ws", l.ws).Const(p + "wz", l.wz);
    b->Const(p + "ys", QScalar(DType::kFloat, y_scale)).Const(p + "yz", QScalar(k.yt, k.y_zp));
    if (k.bias) b->Const(p + "bq", l.bq);
  }
  if (k.bias) qdq.Const(p + "bs", l.bs);
  if (!k.weights_first) qdq.Node("DequantizeLinear", {xq, xs, xz}, {p + "x"});
  SetInt(qdq.Node("DequantizeLinear", {p + "wq", p + "ws", p + "wz"}, {p + "w"}), "axis", 0);
  std::vector<std::string> conv_in = {p + "x", p + "w"};
  if (k.bias) {
    SetInt(qdq.Node("DequantizeLinear", {p + "bq", p + "bs"}, {p + "b"}), "axis", 0);
    conv_in.push_back(p + "b");
  }
  if (k.weights_first) qdq.Node("DequantizeLinear", {xq, xs, xz}, {p + "x"});
  auto attrs = [&](ir::Node& n) {
    SetInts(n, "strides", {l.stride, l.stride});
    const int64_t e = l.pad_end < 0 ? l.pad : l.pad_end;
    SetInts(n, "pads", {l.pad, l.pad, e, e});
    SetInts(n, "dilations", {l.dil, l.dil});
    SetInt(n, "group", l.group);
  };
  attrs(qdq.Node("Conv", conv_in, {p + "c"}));
  std::string c = p + "c";
  if (k.relu) {
    qdq.Node("Relu", {c}, {p + "r"});
    c = p + "r";
  }
  qdq.Node("QuantizeLinear", {c, p + "ys", p + "yz"}, {yq});
  std::vector<std::string> qin = {xq, xs, xz, p + "wq", p + "ws", p + "wz", p + "ys", p + "yz"};
  if (k.bias) qin.push_back(p + "bq");
  const std::string raw = k.relu ? p + "raw" : yq;
  attrs(ref.Node("QLinearConv", qin, {raw}));
  if (k.relu) {
    // Relu before the quantization: max(q, y_zp).
    ref.Node("Max", {raw, p + "yz"}, {yq});
  }
}

Layer MakeLayer(const QCase& k, int64_t c, int64_t oc, int64_t kh, int64_t kw, int64_t group,
                float xs, uint32_t seed) {
  Layer l;
  l.oc = oc, l.kh = kh, l.kw = kw, l.group = group;
  l.wq = RandInts<int8_t>(DType::kInt8, {oc, c / group, kh, kw}, -k.wmax, k.wmax, seed);
  std::mt19937 gen(seed + 7);
  std::uniform_real_distribution<float> sd(0.002f, 0.02f);
  const int64_t ns = k.per_channel ? oc : 1;
  l.ws = Tensor(DType::kFloat, {ns});
  for (int64_t i = 0; i < ns; ++i) l.ws.data<float>()[i] = k.mult > 0 ? 1.f : sd(gen);
  l.wz = Tensor(DType::kInt8, {ns});
  std::fill(l.wz.data<int8_t>(), l.wz.data<int8_t>() + ns, int8_t{0});
  l.bs = Tensor(DType::kFloat, {ns});
  for (int64_t i = 0; i < ns; ++i) l.bs.data<float>()[i] = xs * l.ws.data<float>()[i];
  const int bmax = k.mult > 0 ? 50 : 20000;
  l.bq = RandInts<int32_t>(DType::kInt32, {oc}, -bmax, bmax, seed + 3);
  // An output scale that spreads the results over the type's range (and past it a little).
  const double k_elems = static_cast<double>(c / group * kh * kw);
  const double sigma = std::sqrt(k_elems) * 74.0 * k.wmax / 1.7;
  l.ys = k.mult > 0 ? 1.f : static_cast<float>(xs * l.ws.data<float>()[0] * sigma / 60.0);
  return l;
}

// Runs the QDQ graph on the cpu provider (twice) and the QLinearConv graph on the reference
// provider; the outputs must be equal. Returns how many QConv patterns ran.
int CheckQConv(const QCase& k) {
  GraphBuilder qdq, ref;
  qdq.Opset(13);
  ref.Opset(13);
  const int xlo = k.xt == DType::kUint8 ? 0 : -128, xhi = k.xt == DType::kUint8 ? 255 : 127;
  Tensor xq = k.xt == DType::kUint8
                  ? RandInts<uint8_t>(k.xt, {k.n, k.c, k.h, k.w}, xlo, xhi, k.seed)
                  : RandInts<int8_t>(k.xt, {k.n, k.c, k.h, k.w}, xlo, xhi, k.seed);
  const float xs = k.mult > 0 ? k.mult : 0.0173f;
  for (GraphBuilder* b : {&qdq, &ref}) {
    b->Input("xq", xq);
    b->Const("xs", QScalar(DType::kFloat, xs)).Const("xz", QScalar(k.xt, k.x_zp));
  }
  Layer l1 = MakeLayer(k, k.c, k.oc, k.kh, k.kw, k.group, xs, k.seed + 11);
  l1.stride = k.stride, l1.pad = k.pad, l1.pad_end = k.pad_end, l1.dil = k.dil;
  AddLayer(qdq, ref, k, l1, 1, "xq", "xs", "xz", "y1", l1.ys);
  std::string out = "y1";
  if (k.chain == 2) {
    // The second layer reads y1 (its scale and zero point are the first layer's output's).
    QCase k2 = k;
    Layer l2 = MakeLayer(k2, k.oc, 8, 3, 3, 1, l1.ys, k.seed + 29);
    l2.stride = 1, l2.pad = 1, l2.pad_end = 1, l2.dil = 1;
    AddLayer(qdq, ref, k, l2, 2, "y1", "l1_ys", "l1_yz", "y2", l2.ys);
    out = "y2";
  }
  qdq.Output(out);
  ref.Output(out);
  SessionOptions ro;
  ro.provider = "reference";
  auto rs = Session::Create(ref.model(), ro);
  EXPECT_TRUE(rs.ok()) << rs.status().message();
  if (!rs.ok()) return 0;
  auto want = (*rs)->Run(ref.feeds());
  EXPECT_TRUE(want.ok()) << want.status().message();
  SessionOptions co;
  co.threads = 2;
  auto cs = Session::Create(qdq.model(), co);
  EXPECT_TRUE(cs.ok()) << cs.status().message();
  if (!want.ok() || !cs.ok()) return 0;
  int ran = 0;
  for (int round = 0; round < 2; ++round) {
    auto got = (*cs)->Run(qdq.feeds());
    EXPECT_TRUE(got.ok()) << got.status().message();
    if (!got.ok()) return 0;
    const Tensor& g = (*got)[0].tensor();
    const Tensor& w = (*want)[0].tensor();
    EXPECT_EQ(g.shape(), w.shape());
    EXPECT_EQ(g.dtype(), w.dtype());
    if (g.shape() != w.shape() || g.dtype() != w.dtype()) return 0;
    int64_t bad = 0, first = -1, lo = 1000, hi = -1000;
    for (int64_t i = 0; i < g.size(); ++i) {
      lo = std::min(lo, w.GetAsInt64(i));
      hi = std::max(hi, w.GetAsInt64(i));
      if (g.GetAsInt64(i) != w.GetAsInt64(i) && bad++ == 0) first = i;
    }
    EXPECT_EQ(bad, 0) << "round " << round << ": " << bad << " of " << g.size()
                      << " differ, first at " << first << ": "
                      << (first >= 0 ? g.GetAsInt64(first) : 0) << " vs "
                      << (first >= 0 ? w.GetAsInt64(first) : 0);
    EXPECT_LT(lo, hi) << "degenerate output range";
    ran = 0;
    for (const auto& r : (*cs)->node_report()) ran += r.provider == "cpu (QConv)";
  }
  return ran;
}

TEST(QConv, PerChannelU8) {
  EXPECT_EQ(CheckQConv({.n = 1,
                        .c = 16,
                        .h = 9,
                        .w = 11,
                        .oc = 24,
                        .kh = 3,
                        .kw = 3,
                        .pad = 1,
                        .wmax = 64,
                        .seed = 1}),
            1);
}

TEST(QConv, WeightDequantizeFirst) {
  // W's and B's integers are last read by their DequantizeLinear, before the pattern's host (the
  // order ferry quantize writes): the runtime keeps them alive until the host.
  QCase k = {.n = 1,
             .c = 8,
             .h = 9,
             .w = 9,
             .oc = 16,
             .kh = 3,
             .kw = 3,
             .pad = 1,
             .y_zp = 12,
             .wmax = 64,
             .chain = 2,
             .weights_first = true,
             .seed = 14};
  EXPECT_EQ(CheckQConv(k), 2);
}

TEST(QConv, AwkwardShapesAndZeroPoints) {
  // Odd channel counts, strides, asymmetric pads, dilation, zero points on both sides.
  const QCase cases[] = {
      {.n = 2,
       .c = 3,
       .h = 17,
       .w = 13,
       .oc = 7,
       .kh = 7,
       .kw = 7,
       .stride = 2,
       .pad = 3,
       .x_zp = 114,
       .y_zp = 131,
       .seed = 2},
      {.n = 1,
       .c = 5,
       .h = 8,
       .w = 9,
       .oc = 6,
       .kh = 3,
       .kw = 2,
       .stride = 2,
       .pad = 1,
       .pad_end = 0,
       .x_zp = 7,
       .y_zp = 0,
       .relu = true,
       .seed = 3},
      {.n = 1,
       .c = 12,
       .h = 10,
       .w = 10,
       .oc = 12,
       .kh = 3,
       .kw = 3,
       .pad = 2,
       .dil = 2,
       .xt = DType::kInt8,
       .yt = DType::kInt8,
       .x_zp = -5,
       .y_zp = 9,
       .seed = 4},
      {.n = 1,
       .c = 32,
       .h = 6,
       .w = 6,
       .oc = 40,
       .kh = 1,
       .kw = 1,
       .xt = DType::kInt8,
       .yt = DType::kInt8,
       .per_channel = false,
       .relu = true,
       .seed = 5},
      {.n = 3,
       .c = 8,
       .h = 5,
       .w = 7,
       .oc = 16,
       .kh = 3,
       .kw = 3,
       .pad = 1,
       .y_zp = 77,
       .relu = true,
       .bias = false,
       .seed = 6},
  };
  for (const QCase& k : cases) {
    SCOPED_TRACE(k.seed);
    CheckQConv(k);
  }
}

TEST(QConv, GroupsAndDepthwise) {
  const QCase cases[] = {
      {.n = 1,
       .c = 32,
       .h = 12,
       .w = 12,
       .oc = 32,
       .kh = 3,
       .kw = 3,
       .group = 32,
       .pad = 1,
       .relu = true,
       .seed = 7},
      {.n = 2,
       .c = 48,
       .h = 9,
       .w = 9,
       .oc = 48,
       .kh = 3,
       .kw = 3,
       .group = 48,
       .stride = 2,
       .pad = 1,
       .x_zp = 3,
       .y_zp = 120,
       .seed = 8},
      {.n = 1,
       .c = 16,
       .h = 7,
       .w = 7,
       .oc = 24,
       .kh = 3,
       .kw = 3,
       .group = 4,
       .pad = 1,
       .y_zp = 5,
       .seed = 9},
  };
  for (const QCase& k : cases) {
    SCOPED_TRACE(k.seed);
    CheckQConv(k);
  }
}

TEST(QConv, TiesWithOddZeroPoint) {
  // Multiplier 0.5: half of the accumulators land exactly on .5 (round half to even, then + 3).
  CheckQConv({.n = 1,
              .c = 4,
              .h = 6,
              .w = 6,
              .oc = 8,
              .kh = 1,
              .kw = 1,
              .y_zp = 3,
              .per_channel = false,
              .bias = true,
              .wmax = 1,
              .mult = 0.5f,
              .seed = 10});
  CheckQConv({.n = 1,
              .c = 4,
              .h = 6,
              .w = 6,
              .oc = 8,
              .kh = 1,
              .kw = 1,
              .yt = DType::kInt8,
              .y_zp = -7,
              .per_channel = false,
              .wmax = 1,
              .mult = 0.25f,
              .seed = 11});
}

TEST(QConv, ChainKeepsInt8Between) {
  // Two patterns in a row: the first writes int8 in the second's layout.
  EXPECT_EQ(CheckQConv({.n = 1,
                        .c = 8,
                        .h = 10,
                        .w = 10,
                        .oc = 16,
                        .kh = 3,
                        .kw = 3,
                        .pad = 1,
                        .relu = true,
                        .wmax = 64,
                        .chain = 2,
                        .seed = 12}),
            2);
  CheckQConv({.n = 2,
              .c = 3,
              .h = 9,
              .w = 9,
              .oc = 16,
              .kh = 3,
              .kw = 3,
              .stride = 2,
              .pad = 1,
              .x_zp = 100,
              .y_zp = 60,
              .chain = 2,
              .seed = 13});
}

// ---- QAdd / QMaxPool: against the unfused float steps on the reference provider (bit for bit,
// except QAdd's ratio form, which rounds like ONNX Runtime's QLinearAdd) ----

int CountProvider(const std::vector<runtime::NodeReport>& report, const std::string& p) {
  int n = 0;
  for (const auto& r : report) n += r.provider == p;
  return n;
}

TEST(QAdd, MatchesFloatSteps) {
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE(variant);
    const DType t = variant % 2 ? DType::kInt8 : DType::kUint8;
    GraphBuilder b;
    b.Opset(13);
    const Shape shape = {2, 5, 7, 9};
    if (t == DType::kUint8) {
      b.Input("a", RandInts<uint8_t>(t, shape, 0, 255, 31));
      b.Input("b", RandInts<uint8_t>(t, shape, 0, 255, 32));
    } else {
      b.Input("a", RandInts<int8_t>(t, shape, -128, 127, 31));
      b.Input("b", RandInts<int8_t>(t, shape, -128, 127, 32));
    }
    b.Const("as", QScalar(DType::kFloat, 0.0123)).Const("az", QScalar(t, 17));
    b.Const("bs", QScalar(DType::kFloat, 0.031)).Const("bz", QScalar(t, 3));
    const DType yt = variant >= 2 ? DType::kInt8 : DType::kUint8;
    b.Const("ys", QScalar(DType::kFloat, 0.0217)).Const("yz", QScalar(yt, variant == 1 ? 0 : 11));
    b.Node("DequantizeLinear", {"a", "as", "az"}, {"fa"});
    b.Node("DequantizeLinear", {"b", "bs", "bz"}, {"fb"});
    b.Node("Add", {"fa", "fb"}, {"s"});
    std::string v = "s";
    if (variant == 1) {
      b.Node("Relu", {"s"}, {"r"});
      v = "r";
    } else if (variant == 3) {
      b.Const("lo", QScalar(DType::kFloat, -0.5)).Const("hi", QScalar(DType::kFloat, 1.25));
      b.Node("Clip", {"s", "lo", "hi"}, {"r"});
      v = "r";
    }
    b.Node("QuantizeLinear", {v, "ys", "yz"}, {"y"});
    b.Output("y");
    // Variant 0 (u8 in and out, no clip) takes the ratio form: at most one step off the float
    // steps (QAdd.RoundsLikeOrtQLinearAdd checks it exactly); the others are bit for bit.
    EXPECT_EQ(CountProvider(ExpectMatchesReference(b, 0, variant == 0 ? 1 : 0), "cpu (QAdd)"), 1);
  }
}

// a, b and y uint8 (or all int8), no clip: QAdd rounds as ONNX Runtime's QLinearAdd, the scale
// ratios fused: q = saturate(nearbyint(fma(a, sa/sy, fma(b, sb/sy, zy - fma(sa/sy, za, sb/sy *
// zb))))). sa/sy = 0.5 makes ties that the float steps' rounding error decides otherwise (ORT 1.30
// gives these values; the float steps give e.g. 1 for a = 59, b = 0 where the ratio form gives 0).
TEST(QAdd, RoundsLikeOrtQLinearAdd) {
  for (DType t : {DType::kUint8, DType::kInt8}) {
    SCOPED_TRACE(DTypeName(t));
    const bool u8 = t == DType::kUint8;
    const int lo = u8 ? 0 : -128, hi = u8 ? 255 : 127;
    const float sa = 0.02f, sb = 0.03f, sy = 0.04f;
    const int za = u8 ? 128 : 0, zb = u8 ? 120 : -8, zy = u8 ? 125 : -3;
    // Every (a, b) pair on a 64 x 64 grid over the type's range.
    const Shape shape = {1, 64, 8, 8};
    Tensor a(t, shape), bt(t, shape);
    auto set = [u8](Tensor& x, int64_t i, int v) {
      if (u8)
        x.data<uint8_t>()[i] = static_cast<uint8_t>(v);
      else
        x.data<int8_t>()[i] = static_cast<int8_t>(v);
    };
    for (int64_t i = 0; i < 4096; ++i) {
      set(a, i, lo + static_cast<int>((i % 64) * 4 + (i / 64) % 4));
      set(bt, i, lo + static_cast<int>((i / 64) * 4));
    }
    GraphBuilder b;
    b.Opset(13);
    b.Input("a", a);
    b.Input("b", bt);
    b.Const("as", QScalar(DType::kFloat, sa)).Const("az", QScalar(t, za));
    b.Const("bs", QScalar(DType::kFloat, sb)).Const("bz", QScalar(t, zb));
    b.Const("ys", QScalar(DType::kFloat, sy)).Const("yz", QScalar(t, zy));
    b.Node("DequantizeLinear", {"a", "as", "az"}, {"fa"});
    b.Node("DequantizeLinear", {"b", "bs", "bz"}, {"fb"});
    b.Node("Add", {"fa", "fb"}, {"s"});
    b.Node("QuantizeLinear", {"s", "ys", "yz"}, {"y"});
    b.Output("y");
    // Within one step of the float steps, and the pattern ran.
    EXPECT_EQ(CountProvider(ExpectMatchesReference(b, 0, 1), "cpu (QAdd)"), 1);
    SessionOptions ref_opts;
    ref_opts.provider = "reference";
    auto ref = Session::Create(b.model(), ref_opts);
    auto cpu = Session::Create(b.model(), SessionOptions{});
    ASSERT_TRUE(ref.ok() && cpu.ok());
    auto want = (*ref)->Run(b.feeds());
    auto got = (*cpu)->Run(b.feeds());
    ASSERT_TRUE(want.ok() && got.ok());
    const Tensor& g = (*got)[0].tensor();
    const Tensor& w = (*want)[0].tensor();
    const float ra = sa / sy, rb = sb / sy;
    const float c =
        static_cast<float>(zy) - std::fma(ra, static_cast<float>(za), rb * static_cast<float>(zb));
    int64_t off_float_steps = 0;
    for (int64_t i = 0; i < g.size(); ++i) {
      const float v = std::fma(static_cast<float>(a.GetAsInt64(i)), ra,
                               std::fma(static_cast<float>(bt.GetAsInt64(i)), rb, c));
      const int64_t q = std::clamp<int64_t>(static_cast<int64_t>(std::nearbyint(v)), lo, hi);
      ASSERT_EQ(g.GetAsInt64(i), q)
          << "element " << i << ": a " << a.GetAsInt64(i) << " b " << bt.GetAsInt64(i);
      off_float_steps += g.GetAsInt64(i) != w.GetAsInt64(i);
    }
    // The two roundings really differ on this data (else this test proves nothing).
    EXPECT_GT(off_float_steps, 0);
  }
}

TEST(QMaxPool, MatchesFloatSteps) {
  for (DType t : {DType::kUint8, DType::kInt8}) {
    GraphBuilder b;
    b.Opset(13);
    const Shape shape = {2, 6, 11, 10};
    if (t == DType::kUint8)
      b.Input("x", RandInts<uint8_t>(t, shape, 0, 255, 41));
    else
      b.Input("x", RandInts<int8_t>(t, shape, -128, 127, 41));
    b.Const("s", QScalar(DType::kFloat, 0.0377)).Const("z", QScalar(t, 9));
    b.Node("DequantizeLinear", {"x", "s", "z"}, {"f"});
    ir::Node& mp = b.Node("MaxPool", {"f"}, {"p"});
    SetInts(mp, "kernel_shape", {3, 3});
    SetInts(mp, "strides", {2, 2});
    SetInts(mp, "pads", {1, 1, 1, 0});
    b.Node("QuantizeLinear", {"p", "s", "z"}, {"y"});
    b.Output("y");
    EXPECT_EQ(CountProvider(ExpectMatchesReference(b, 0, 0), "cpu (QMaxPool)"), 1);
  }
}

// ---- QuantizeLinear / DequantizeLinear ----

TEST(QdqKernels, QuantizeDequantizeMatchReference) {
  for (DType qt : {DType::kUint8, DType::kInt8}) {
    GraphBuilder b;
    b.Opset(13);
    const float s = 0.037f;
    Tensor x = Rand({2, 3, 7, 9}, 21, -12.f, 12.f);
    float* xp = x.data<float>();
    // Ties, NaN, infinities, values far outside the range.
    for (int i = 0; i < 40; ++i) xp[i] = (static_cast<float>(i - 20) + 0.5f) * s;
    xp[40] = std::nanf("");
    xp[41] = INFINITY;
    xp[42] = -INFINITY;
    xp[43] = 1e30f;
    b.Input("x", x);
    b.Const("s", QScalar(DType::kFloat, s)).Const("z", QScalar(qt, qt == DType::kUint8 ? 129 : -3));
    b.Node("QuantizeLinear", {"x", "s", "z"}, {"q"});
    b.Node("DequantizeLinear", {"q", "s", "z"}, {"y"});
    b.Output("q").Output("y");
    auto report = ExpectMatchesReference(b, 0, 0);
    int cpu = 0;
    for (const auto& r : report) cpu += r.provider == "cpu";
    EXPECT_EQ(cpu, 2);
  }
}

TEST(QdqKernels, Int32AndPerAxisDequantize) {
  GraphBuilder b;
  b.Opset(13);
  Tensor xi = RandInts<int32_t>(DType::kInt32, {5, 33}, -3000000, 3000000, 5);
  b.Input("xi", xi);
  b.Const("s", QScalar(DType::kFloat, 0.0031f));
  b.Node("DequantizeLinear", {"xi", "s"}, {"y"});
  // Per axis 1 without zero point, per axis 0 with one (uint8), per axis 0 of int8 weights.
  b.Input("xu", RandInts<uint8_t>(DType::kUint8, {2, 4, 3}, 0, 255, 6));
  Tensor sv(DType::kFloat, {4});
  for (int i = 0; i < 4; ++i) sv.data<float>()[i] = 0.01f * static_cast<float>(i + 1);
  b.Const("sv", sv);
  SetInt(b.Node("DequantizeLinear", {"xu", "sv"}, {"y2"}), "axis", 1);
  b.Input("xu0", RandInts<uint8_t>(DType::kUint8, {4, 5, 9}, 0, 255, 7));
  b.Const("zv", RandInts<uint8_t>(DType::kUint8, {4}, 0, 255, 8));
  SetInt(b.Node("DequantizeLinear", {"xu0", "sv", "zv"}, {"y3"}), "axis", 0);
  b.Const("w", RandInts<int8_t>(DType::kInt8, {4, 3, 3, 3}, -127, 127, 9));
  SetInt(b.Node("DequantizeLinear", {"w", "sv"}, {"y4"}), "axis", 0);
  b.Output("y").Output("y2").Output("y3").Output("y4");
  int cpu = 0;
  for (const auto& r : ExpectMatchesReference(b, 0, 0)) cpu += r.provider == "cpu";
  EXPECT_EQ(cpu, 4);
}

}  // namespace
}  // namespace ferry::cpu_test

// The runtime's lazy constant DequantizeLinear (src/runtime/session.cc, cpu provider): a
// DequantizeLinear of initializers runs only when a step that runs reads its float output. Under a
// QConv pattern (which reads the int8 weights) the float weights are never made; when the pattern
// declines, or a float kernel (Gemm) reads them, they are computed once and shared.
#include <map>
#include <random>

#include "cpu/cpu_harness.h"

namespace ferry::cpu_test {
namespace {

std::map<std::string, std::string> Providers(const Session& s) {
  std::map<std::string, std::string> p;
  for (const auto& r : s.node_report()) p[r.name] = r.provider;
  return p;
}

// DequantizeLinear(x_q) -> Conv(W = DequantizeLinear(w_q), B = DequantizeLinear(b_q)) ->
// QuantizeLinear(y_scale), per-output-channel weights, with the weights' DequantizeLinear first
// (as ferry quantize writes them); `ref` gets the same layer as one QLinearConv.
void BuildQdqConv(GraphBuilder& qdq, GraphBuilder& ref, float y_scale) {
  const int64_t c = 5, oc = 7;
  const float xs = 0.0173f;
  Tensor xq = RandInts<uint8_t>(DType::kUint8, {1, c, 7, 6}, 0, 255, 3);
  Tensor wq = RandInts<int8_t>(DType::kInt8, {oc, c, 3, 3}, -60, 60, 5);
  Tensor ws(DType::kFloat, {oc}), wz(DType::kInt8, {oc}), bs(DType::kFloat, {oc});
  for (int64_t i = 0; i < oc; ++i) {
    ws.data<float>()[i] = 0.004f + 0.001f * static_cast<float>(i);
    wz.data<int8_t>()[i] = 0;
    bs.data<float>()[i] = xs * ws.data<float>()[i];
  }
  Tensor bq = RandInts<int32_t>(DType::kInt32, {oc}, -3000, 3000, 7);
  for (GraphBuilder* b : {&qdq, &ref}) {
    b->Opset(13);
    b->Input("xq", xq);
    b->Const("xs", QScalar(DType::kFloat, xs)).Const("xz", QScalar(DType::kUint8, 9));
    b->Const("wq", wq).Const("ws", ws).Const("wz", wz).Const("bq", bq);
    b->Const("ys", QScalar(DType::kFloat, y_scale)).Const("yz", QScalar(DType::kUint8, 128));
  }
  qdq.Const("bs", bs);
  SetInt(qdq.Node("DequantizeLinear", {"wq", "ws", "wz"}, {"w"}), "axis", 0);  // node 0
  SetInt(qdq.Node("DequantizeLinear", {"bq", "bs"}, {"b"}), "axis", 0);        // node 1
  qdq.Node("DequantizeLinear", {"xq", "xs", "xz"}, {"x"});                     // node 2
  SetInts(qdq.Node("Conv", {"x", "w", "b"}, {"c"}), "pads", {1, 1, 1, 1});     // node 3
  qdq.Node("QuantizeLinear", {"c", "ys", "yz"}, {"y"});                        // node 4
  qdq.Output("y");
  SetInts(ref.Node("QLinearConv", {"xq", "xs", "xz", "wq", "ws", "wz", "ys", "yz", "bq"}, {"y"}),
          "pads", {1, 1, 1, 1});
  ref.Output("y");
}

TEST(LazyDequantize, QConvLeavesWeightsUnmaterialized) {
  GraphBuilder qdq, ref;
  BuildQdqConv(qdq, ref, 0.05f);
  SessionOptions ro;
  ro.provider = "reference";
  auto rs = Session::Create(ref.model(), ro);
  ASSERT_TRUE(rs.ok()) << rs.status().message();
  auto want = (*rs)->Run(ref.feeds());
  ASSERT_TRUE(want.ok()) << want.status().message();
  SessionOptions co;
  co.threads = 2;
  auto cs = Session::Create(qdq.model(), co);
  ASSERT_TRUE(cs.ok()) << cs.status().message();
  for (int round = 0; round < 2; ++round) {
    auto got = (*cs)->Run(qdq.feeds());
    ASSERT_TRUE(got.ok()) << got.status().message();
    const Tensor& g = (*got)[0].tensor();
    const Tensor& w = (*want)[0].tensor();
    ASSERT_EQ(g.shape(), w.shape());
    int64_t bad = 0;
    for (int64_t i = 0; i < g.size(); ++i) bad += g.GetAsInt64(i) != w.GetAsInt64(i);
    EXPECT_EQ(bad, 0) << "round " << round;
    auto p = Providers(**cs);
    EXPECT_EQ(p["DequantizeLinear_2"], "cpu (QConv)") << "round " << round;
    EXPECT_EQ(p["DequantizeLinear_0"], "cpu (unused constant)") << "round " << round;
    EXPECT_EQ(p["DequantizeLinear_1"], "cpu (unused constant)") << "round " << round;
    EXPECT_EQ(p["Conv_3"], "fused");
  }
  // An observer still sees every node's output, the float weights included.
  runtime::RunOptions opts;
  int64_t w_elems = -1;
  opts.observer = [&](const ir::Node&, const std::string& name, const Value& v) {
    if (name == "w" && v.is_tensor()) w_elems = v.tensor().size();
  };
  auto got = (*cs)->Run(qdq.feeds(), opts);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(w_elems, 7 * 5 * 3 * 3);
  EXPECT_EQ(Providers(**cs)["DequantizeLinear_0"], "cpu");  // run at its position, as before
  // Runs without an observer leave it alone again.
  got = (*cs)->Run(qdq.feeds());
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(Providers(**cs)["DequantizeLinear_0"], "cpu (unused constant)");
}

TEST(LazyDequantize, DeclinedPatternStillGetsFloatWeights) {
  // A negative output scale: QConv declines at prepare and the steps run one by one, the Conv
  // reading the float weights and bias (computed then). Outputs as the reference provider's on
  // the same graph (the float Conv may round a product differently: one step of the output).
  GraphBuilder qdq, ref;
  BuildQdqConv(qdq, ref, -0.05f);
  auto report = ExpectMatchesReference(qdq, 0, 1.0);
  std::map<std::string, std::string> p;
  for (const auto& r : report) p[r.name] = r.provider;
  EXPECT_EQ(p["DequantizeLinear_0"], "cpu (folded constant)");
  EXPECT_EQ(p["DequantizeLinear_1"], "cpu (folded constant)");
  EXPECT_EQ(p["Conv_3"], "cpu");
}

TEST(LazyDequantize, FloatGemmReadsDequantizedWeights) {
  // Gemm(x, DequantizeLinear(w_q)^T) + DequantizeLinear(b_q): the float kernel gets both (and,
  // the weights being constant, may pack them once).
  GraphBuilder b;
  b.Opset(13);
  b.Input("x", Rand({3, 20}, 1));
  Tensor ws(DType::kFloat, {12});
  for (int64_t i = 0; i < 12; ++i) ws.data<float>()[i] = 0.01f + 0.002f * static_cast<float>(i);
  b.Const("wq", RandInts<int8_t>(DType::kInt8, {12, 20}, -127, 127, 2))
      .Const("ws", ws)
      .Const("wz", RandInts<int8_t>(DType::kInt8, {12}, -3, 3, 4));
  b.Const("bq", RandInts<int32_t>(DType::kInt32, {12}, -500, 500, 6))
      .Const("bs", QScalar(DType::kFloat, 0.003));
  SetInt(b.Node("DequantizeLinear", {"wq", "ws", "wz"}, {"w"}), "axis", 0);  // node 0
  b.Node("DequantizeLinear", {"bq", "bs"}, {"bias"});                        // node 1
  SetInt(b.Node("Gemm", {"x", "w", "bias"}, {"y"}), "transB", 1);            // node 2
  b.Node("Relu", {"w"}, {"wr"});                                             // node 3
  b.Output("y").Output("wr");
  auto report = ExpectMatchesReference(b);
  std::map<std::string, std::string> p;
  for (const auto& r : report) p[r.name] = r.provider;
  EXPECT_EQ(p["DequantizeLinear_0"], "cpu (folded constant)");
  EXPECT_EQ(p["DequantizeLinear_1"], "cpu (folded constant)");
}

}  // namespace
}  // namespace ferry::cpu_test

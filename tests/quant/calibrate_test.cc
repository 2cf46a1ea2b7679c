// Calibration statistics and parameters against hand-computed values; the table round trip;
// the QDQ rewrite's structure on a tiny Conv -> Relu graph.
#include "quant/calibrate.h"

#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>
#include <omp.h>

#include "graph_builders.h"
#include "quant/data.h"
#include "quant/qdq.h"

namespace ferry::quant {
namespace {

TEST(QuantHistogram, MinMaxAndGrowthKeepCounts) {
  Histogram h;
  std::vector<float> a = {0.f, 1.f, 2.f, 3.f};
  h.Add(a.data(), 4);
  std::vector<float> b = {-10.f, 50.f, std::numeric_limits<float>::quiet_NaN()};
  h.Add(b.data(), 3);
  EXPECT_DOUBLE_EQ(h.min, -10);
  EXPECT_DOUBLE_EQ(h.max, 50);
  EXPECT_EQ(h.count, 6);
  EXPECT_EQ(h.non_finite, 1);
  EXPECT_EQ(h.bins.size(), static_cast<size_t>(Histogram::kBins));
  double total = 0;
  for (double c : h.bins) total += c;
  EXPECT_DOUBLE_EQ(total, 6);  // re-binning keeps every count
  EXPECT_LE(h.lo, -10);
  EXPECT_GE(h.hi, 50);
  auto [lo, hi] = h.Range(Method{});
  EXPECT_DOUBLE_EQ(lo, -10);
  EXPECT_DOUBLE_EQ(hi, 50);
}

// Many chunks (the parallel path), runs of zeros, NaN and +-inf: the bins equal a plain serial
// binning with the same formula, and do not depend on the thread count.
TEST(QuantHistogram, ParallelAddMatchesSerialBinningAtAnyThreadCount) {
  std::mt19937 rng(11);
  std::normal_distribution<float> n(0.f, 3.f);
  std::vector<float> a(300001), b(70000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = (i / 1000) % 2 ? 0.f : n(rng);  // ReLU-like runs
  for (auto& v : b) v = 4.f * n(rng);  // wider: the histogram grows
  a[5] = std::numeric_limits<float>::quiet_NaN();
  a[200000] = std::numeric_limits<float>::infinity();
  b[69999] = -std::numeric_limits<float>::infinity();
  // The serial reference of the first Add: [min, max] of the finite values, 2048 bins.
  double mn = 1e30, mx = -1e30;
  for (float v : a)
    if (std::isfinite(v)) mn = std::min<double>(mn, v), mx = std::max<double>(mx, v);
  std::vector<double> expect(Histogram::kBins, 0.0);
  for (float v : a) {
    if (!std::isfinite(v)) continue;
    auto k = static_cast<int64_t>((v - mn) * (Histogram::kBins / (mx - mn)));
    expect[static_cast<size_t>(std::clamp<int64_t>(k, 0, Histogram::kBins - 1))] += 1;
  }
  std::vector<Histogram> hs;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    Histogram h;
    h.Add(a.data(), static_cast<int64_t>(a.size()));
    EXPECT_EQ(h.bins, expect) << threads << " threads";
    EXPECT_DOUBLE_EQ(h.min, mn);
    EXPECT_DOUBLE_EQ(h.max, mx);
    EXPECT_EQ(h.non_finite, 2);
    h.Add(b.data(), static_cast<int64_t>(b.size()));
    EXPECT_EQ(h.non_finite, 3);
    EXPECT_EQ(h.count, static_cast<int64_t>(a.size() + b.size()) - 3);
    hs.push_back(std::move(h));
  }
  omp_set_num_threads(omp_get_num_procs());
  EXPECT_EQ(hs[0].bins, hs[1].bins);
  EXPECT_EQ(hs[0].bins, hs[2].bins);
  EXPECT_EQ(hs[0].lo, hs[2].lo);
  EXPECT_EQ(hs[0].hi, hs[2].hi);
}

TEST(QuantHistogram, PercentileClipsTheTail) {
  // 9999 values uniform in [0, 1) and one at 1000: 99.9% keeps about [0, 1].
  Histogram h;
  std::vector<float> v;
  for (int i = 0; i < 9999; ++i) v.push_back(static_cast<float>(i) / 9999.f);
  v.push_back(1000.f);
  h.Add(v.data(), static_cast<int64_t>(v.size()));
  Method m;
  m.kind = Method::Kind::kPercentile;
  m.percentile = 99.9;
  auto [lo, hi] = h.Range(m);
  EXPECT_DOUBLE_EQ(lo, 0);
  // One bin is 1000/2048 wide: the threshold is the end of the bin holding 1.0.
  EXPECT_GT(hi, 0.99);
  EXPECT_LT(hi, 1.0 + 1000.0 / Histogram::kBins + 1e-9);
  m.percentile = 100;
  EXPECT_DOUBLE_EQ(h.Range(m).second, 1000);
}

TEST(QuantHistogram, EntropyIgnoresRareOutliersButNotTheBulk) {
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.f, 1.f);
  Histogram h;
  std::vector<float> v;
  for (int i = 0; i < 200000; ++i) v.push_back(n(rng));
  v.push_back(60.f);  // one outlier
  h.Add(v.data(), static_cast<int64_t>(v.size()));
  Method m;
  m.kind = Method::Kind::kEntropy;
  auto [lo, hi] = h.Range(m);
  // The bulk (|x| < ~4.5) is kept, the outlier at 60 is clipped.
  EXPECT_GT(hi, 2.5);
  EXPECT_LT(hi, 20);
  EXPECT_LT(lo, -2.5);
}

TEST(QuantParams, HandComputed) {
  QParams u = ComputeQParams(-1.0, 3.0, DType::kUint8, false);
  EXPECT_FLOAT_EQ(u.scale, 4.0f / 255);
  EXPECT_EQ(u.zero_point, 64);  // round(1 / (4/255)) = round(63.75)
  QParams s = ComputeQParams(-1.0, 3.0, DType::kInt8, false);
  EXPECT_FLOAT_EQ(s.scale, 4.0f / 255);
  EXPECT_EQ(s.zero_point, -64);
  QParams sym = ComputeQParams(-1.0, 3.0, DType::kInt8, true);
  EXPECT_FLOAT_EQ(sym.scale, 3.0f / 127);
  EXPECT_EQ(sym.zero_point, 0);
  QParams pos = ComputeQParams(0.5, 2.0, DType::kUint8, false);  // widened to include 0
  EXPECT_FLOAT_EQ(pos.scale, 2.0f / 255);
  EXPECT_EQ(pos.zero_point, 0);
  QParams zero = ComputeQParams(0, 0, DType::kUint8, false);
  EXPECT_FLOAT_EQ(zero.scale, 1.0f);
}

TEST(QuantTable, JsonRoundTripAndErrors) {
  Calibrator c;
  c.Observe("x", Value(Tensor::FromVector<float>({-1, 0, 2}, {3})));
  c.Observe("ids", Value(Tensor::FromVector<int64_t>({1, 2}, {2})));  // not float: ignored
  Table t = c.Finish(Method{}, DType::kUint8, false);
  ASSERT_EQ(t.tensors.size(), 1u);
  t.samples = 1;
  auto back = ParseTable(TableToJson(t), "t");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_NE(back->Find("x"), nullptr);
  EXPECT_DOUBLE_EQ(back->Find("x")->lo, -1);
  EXPECT_DOUBLE_EQ(back->Find("x")->hi, 2);
  EXPECT_EQ(back->Find("x")->q.zero_point, t.tensors[0].q.zero_point);
  EXPECT_EQ(ParseTable("[1]", "t").status().code(), StatusCode::kInvalid);
  EXPECT_EQ(ParseTable(R"({"tensors": {"x": {"range": [2, 1]}}})", "t").status().code(),
            StatusCode::kInvalid);
  EXPECT_EQ(ParseMethod("percentile:0").status().code(), StatusCode::kUsage);
  EXPECT_EQ(ParseMethod("percentile:99.5")->percentile, 99.5);
}

TEST(QuantData, SplitSamplesAlongTheFirstAxis) {
  ir::Graph g;
  ir::ValueInfo in;
  in.name = "x";
  in.type.kind = ir::TypeInfo::Kind::kTensor;
  in.type.elem_type = DType::kFloat;
  in.type.shape = std::vector<ir::Dim>{ir::Dim{std::nullopt, "batch"}, ir::Dim{2, ""}};
  g.inputs.push_back(in);
  verify::DataSet set;
  set.name = "x.npy";
  set.inputs.emplace_back("x",
                          Value(Tensor::FromVector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {5, 2})));
  int64_t samples = 0;
  auto parts = SplitSamples({set}, g, 2, 0, &samples);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(samples, 5);
  EXPECT_EQ(parts[2].inputs[0].second.tensor().dim(0), 1);
  EXPECT_EQ(parts[2].inputs[0].second.tensor().data<float>()[1], 9.f);
  parts = SplitSamples({set}, g, 16, 3, &samples);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(samples, 3);
  EXPECT_EQ(parts[0].inputs[0].second.tensor().dim(0), 3);
}

// x -> Conv(w, b) -> Relu -> GlobalAveragePool -> y, opset 13.
std::unique_ptr<ir::Model> ConvReluModel() {
  auto m = std::make_unique<ir::Model>();
  m->ir_version = 8;
  m->opset_imports.push_back({"", 13});
  ir::Graph& g = m->graph;
  g.inputs.push_back(testing::FloatValue("x", std::vector<int64_t>{1, 2, 4, 4}));
  g.outputs.push_back(testing::FloatValue("y", std::vector<int64_t>{1, 3, 1, 1}));
  g.initializers.push_back(
      {"w", Tensor::FromVector<float>({0.5f, -1.f, 0.25f, 0.125f, -2.f, 1.f}, {3, 2, 1, 1}), ""});
  g.initializers.push_back({"b", Tensor::FromVector<float>({0.1f, -0.2f, 0.3f}, {3}), ""});
  g.nodes.push_back(testing::MakeNode("Conv", {"x", "w", "b"}, {"c"}));
  g.nodes.push_back(testing::MakeNode("Relu", {"c"}, {"r"}));
  g.nodes.push_back(testing::MakeNode("GlobalAveragePool", {"r"}, {"y"}));
  return m;
}

// Conv -> Relu -> GlobalAveragePool with a symbolic batch, and 5 samples in one set: the runs
// follow --batch (auto: one sample, then the rest at once for this tiny model), --max-samples
// keeps the first N, and the table does not depend on how the samples were batched.
TEST(QuantCalibrate, RunsFollowTheBatchAndTheTableDoesNot) {
  auto m = ConvReluModel();
  m->graph.inputs[0] =
      testing::FloatValue("x", std::vector<ir::Dim>{ir::Dim{std::nullopt, "n"}, ir::Dim{2, ""},
                                                    ir::Dim{4, ""}, ir::Dim{4, ""}});
  m->graph.outputs[0] =
      testing::FloatValue("y", std::vector<ir::Dim>{ir::Dim{std::nullopt, "n"}, ir::Dim{3, ""},
                                                    ir::Dim{1, ""}, ir::Dim{1, ""}});
  std::shared_ptr<const ir::Model> model(std::move(m));
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  Tensor x(DType::kFloat, {5, 2, 4, 4});
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = u(rng);
  auto calibrate = [&](int64_t batch, int64_t max_samples) {
    verify::DataSet set;
    set.name = "x.npy";
    set.inputs.emplace_back("x", Value(x));
    CalibrateOptions o;
    o.batch = batch;
    o.max_samples = max_samples;
    auto t = RunCalibration(model, {set}, o);
    EXPECT_TRUE(t.ok()) << t.status().message();
    return t.ok() ? std::move(t).value() : Table{};
  };
  Table one = calibrate(1, 0), two = calibrate(2, 0), aut = calibrate(0, 0);
  EXPECT_EQ(one.runs, 5);
  EXPECT_EQ(two.runs, 3);
  EXPECT_EQ(aut.runs, 2);  // the probe sample, then 4 (< kMaxAutoBatch) at once
  EXPECT_EQ(aut.batch, kMaxAutoBatch);
  for (const Table* t : {&one, &two, &aut}) {
    EXPECT_EQ(t->samples, 5);
    ASSERT_EQ(t->tensors.size(), one.tensors.size());
    for (size_t i = 0; i < one.tensors.size(); ++i) {
      EXPECT_EQ(t->tensors[i].name, one.tensors[i].name);
      EXPECT_EQ(t->tensors[i].min, one.tensors[i].min) << one.tensors[i].name;
      EXPECT_EQ(t->tensors[i].max, one.tensors[i].max) << one.tensors[i].name;
    }
  }
  Table three = calibrate(0, 3);
  EXPECT_EQ(three.samples, 3);
  EXPECT_EQ(three.runs, 2);
  // The first 3 samples only: x's max is theirs.
  float mx = -1e30f;
  for (int64_t i = 0; i < 3 * 32; ++i) mx = std::max(mx, x.data<float>()[i]);
  ASSERT_NE(three.Find("x"), nullptr);
  EXPECT_EQ(three.Find("x")->max, mx);
}

TEST(QuantStatic, ConvReluStructureAndNumbers) {
  auto model = ConvReluModel();
  Table t;
  t.tensors.push_back({"x", -1, 1, -1, 1, {}, 0});
  t.tensors.push_back({"r", 0, 4, 0, 4, {}, 0});
  QuantizeOptions o;
  o.per_channel = true;
  auto sum = QuantizeStatic(*model, t, o);
  ASSERT_TRUE(sum.ok()) << sum.status().message();
  EXPECT_EQ(sum->activations, 2);
  EXPECT_EQ(sum->weights, 1);
  EXPECT_EQ(sum->biases, 1);
  int q = 0, dq = 0, relu = 0;
  const ir::Node* conv = nullptr;
  for (const auto& n : model->graph.nodes) {
    q += n.op_type == "QuantizeLinear";
    dq += n.op_type == "DequantizeLinear";
    relu += n.op_type == "Relu";
    if (n.op_type == "Conv") conv = &n;
  }
  EXPECT_EQ(q, 2);
  EXPECT_EQ(dq, 4);
  EXPECT_EQ(relu, 0);  // zero point 0: the QuantizeLinear clamps at 0
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->outputs[0], "r");
  // Weight per channel: max |w| of each output channel / 127; bias scale = x scale * w scale.
  const float sx = 2.0f / 255;
  const float wscale[3] = {1.f / 127, 0.25f / 127, 2.f / 127};
  bool saw_w = false, saw_b = false;
  for (const auto& init : model->graph.initializers) {
    const Tensor& v = init.tensor;
    if (v.dtype() == DType::kInt8 && v.rank() == 4) {
      saw_w = true;
      EXPECT_EQ(v.data<int8_t>()[0], 64);    // 0.5 / (1/127) = 63.5 -> 64 (half to even)
      EXPECT_EQ(v.data<int8_t>()[1], -127);  // -1 / (1/127)
      EXPECT_EQ(v.data<int8_t>()[4], -127);
    }
    if (v.dtype() == DType::kInt32) {
      saw_b = true;
      for (int c = 0; c < 3; ++c)
        EXPECT_EQ(v.data<int32_t>()[c],
                  static_cast<int32_t>(
                      std::nearbyint(static_cast<double>(std::vector<float>{0.1f, -0.2f, 0.3f}[c]) /
                                     static_cast<double>(sx * wscale[c]))));
    }
  }
  EXPECT_TRUE(saw_w);
  EXPECT_TRUE(saw_b);

  // Numbers: the quantized model runs on the engine, close to the float one.
  auto ref_model = ConvReluModel();
  std::shared_ptr<const ir::Model> fm(std::move(ref_model)), qm(std::move(model));
  runtime::SessionOptions so;
  so.provider = "reference";
  auto fs = runtime::Session::Create(fm, so);
  auto qs = runtime::Session::Create(qm, so);
  ASSERT_TRUE(fs.ok() && qs.ok()) << qs.status().message();
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Tensor x(DType::kFloat, {1, 2, 4, 4});
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = u(rng);
  auto a = (*fs)->Run({{"x", Value(x)}});
  auto b = (*qs)->Run({{"x", Value(x)}});
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().message();
  for (int c = 0; c < 3; ++c)
    EXPECT_NEAR((*a)[0].tensor().data<float>()[c], (*b)[0].tensor().data<float>()[c], 0.05)
        << "channel " << c;
}

TEST(QuantStatic, TableOfAnotherModelIsRefused) {
  auto model = ConvReluModel();
  Table t;
  t.tensors.push_back({"unrelated", 0, 1, 0, 1, {}, 0});
  EXPECT_EQ(QuantizeStatic(*model, t, QuantizeOptions{}).status().code(), StatusCode::kInvalid);
}

// a [3, 4] -> Gemm(w [2, 4], c [2], transB) -> y.
std::unique_ptr<ir::Model> GemmModel() {
  auto m = std::make_unique<ir::Model>();
  m->ir_version = 8;
  m->opset_imports.push_back({"", 13});
  ir::Graph& g = m->graph;
  g.inputs.push_back(testing::FloatValue("a", std::vector<int64_t>{3, 4}));
  g.outputs.push_back(testing::FloatValue("y", std::vector<int64_t>{3, 2}));
  g.initializers.push_back(
      {"w", Tensor::FromVector<float>({1, -2, 3, -4, 0.5f, 0.25f, -1, 2}, {2, 4}), ""});
  g.initializers.push_back({"c", Tensor::FromVector<float>({1, -1}, {2}), ""});
  ir::Node gemm = testing::MakeNode("Gemm", {"a", "w", "c"}, {"y"});
  ir::Attribute tb;
  tb.name = "transB";
  tb.type = ir::AttrType::kInt;
  tb.i = 1;
  gemm.attributes.push_back(std::move(tb));
  g.nodes.push_back(std::move(gemm));
  return m;
}

TEST(QuantDynamic, GemmBecomesMatMulInteger) {
  auto qmodel = GemmModel();
  QuantizeOptions o;
  o.per_channel = true;
  auto sum = QuantizeDynamic(*qmodel, o);
  ASSERT_TRUE(sum.ok()) << sum.status().message();
  EXPECT_EQ(sum->weights, 1);
  bool mmi = false, dql = false, gemm = false;
  for (const auto& n : qmodel->graph.nodes) {
    mmi = mmi || n.op_type == "MatMulInteger";
    dql = dql || n.op_type == "DynamicQuantizeLinear";
    gemm = gemm || n.op_type == "Gemm";
  }
  EXPECT_TRUE(mmi && dql && !gemm);
  runtime::SessionOptions so;
  so.provider = "reference";
  auto before = runtime::Session::Create(std::shared_ptr<const ir::Model>(GemmModel()), so);
  auto after = runtime::Session::Create(std::shared_ptr<const ir::Model>(std::move(qmodel)), so);
  ASSERT_TRUE(before.ok() && after.ok()) << after.status().message();
  Tensor a(DType::kFloat, {3, 4});
  for (int64_t i = 0; i < a.size(); ++i) a.data<float>()[i] = 0.3f * static_cast<float>(i) - 1.5f;
  auto want = (*before)->Run({{"a", Value(a)}});
  auto got = (*after)->Run({{"a", Value(a)}});
  ASSERT_TRUE(want.ok() && got.ok()) << got.status().message();
  for (int i = 0; i < 6; ++i)
    EXPECT_NEAR((*want)[0].tensor().data<float>()[i], (*got)[0].tensor().data<float>()[i], 0.1);
}

}  // namespace
}  // namespace ferry::quant

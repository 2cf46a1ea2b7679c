// Golden capture planning, generation and the test-data layout round trip; per-layer capture.
#include "verify/golden.h"

#include <filesystem>
#include <limits>

#include <gtest/gtest.h>

#include "ir/onnx_io.h"
#include "verify/layers.h"

namespace ferry::verify {
namespace {

namespace fs = std::filesystem;

ir::ValueInfo Input(const std::string& name, DType dt, std::vector<ir::Dim> dims) {
  ir::ValueInfo vi;
  vi.name = name;
  vi.type.kind = ir::TypeInfo::Kind::kTensor;
  vi.type.elem_type = dt;
  vi.type.shape = std::move(dims);
  return vi;
}
ir::Dim Sym(const std::string& s) {
  ir::Dim d;
  d.symbol = s;
  return d;
}
ir::Dim Fixed(int64_t v) {
  ir::Dim d;
  d.value = v;
  return d;
}

// ids [batch, seq] int64 -> Cast -> Gather(table[30, 4]); x [batch, 3] float; attention_mask.
ir::Graph EmbeddingGraph() {
  ir::Graph g;
  g.inputs.push_back(Input("ids", DType::kInt64, {Sym("batch"), Sym("seq")}));
  g.inputs.push_back(Input("x", DType::kFloat, {Sym("batch"), Fixed(3)}));
  g.inputs.push_back(Input("attention_mask", DType::kInt64, {Sym("batch"), Sym("seq")}));
  g.initializers.push_back({"table", Tensor(DType::kFloat, {30, 4}), ""});
  ir::Node cast;
  cast.op_type = "Cast";
  cast.inputs = {"ids"};
  cast.outputs = {"ids32"};
  ir::Node gather;
  gather.op_type = "Gather";
  gather.inputs = {"table", "ids32"};
  gather.outputs = {"emb"};
  g.nodes.push_back(std::move(cast));
  g.nodes.push_back(std::move(gather));
  return g;
}

TEST(GoldenPlan, ShapesAndRanges) {
  ir::Graph g = EmbeddingGraph();
  CaptureOptions o;
  auto plan = PlanCapture(g, o);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->symbols.at("batch"), 1);
  EXPECT_EQ(plan->symbols.at("seq"), 16);
  EXPECT_EQ(plan->seq_symbols, std::vector<std::string>{"seq"});
  ASSERT_EQ(plan->inputs.size(), 3u);
  EXPECT_TRUE(plan->inputs[0].has_range);
  EXPECT_EQ(plan->inputs[0].lo, 0);
  EXPECT_EQ(plan->inputs[0].hi, 29);  // the Gather table's rows, found through the Cast
  EXPECT_TRUE(plan->inputs[2].mask);

  GeneratedSet a = GenerateSet(*plan, o, 0, "random", 0);
  GeneratedSet b = GenerateSet(*plan, o, 0, "random", 0);
  GeneratedSet c = GenerateSet(*plan, o, 1, "random", 0);
  const Tensor& ids = a.inputs[0].second.tensor();
  EXPECT_EQ(ids.shape(), (Shape{1, 16}));
  for (int64_t i = 0; i < ids.size(); ++i) {
    EXPECT_GE(ids.data<int64_t>()[i], 0);
    EXPECT_LE(ids.data<int64_t>()[i], 29);
  }
  const Tensor& xa = a.inputs[1].second.tensor();
  const Tensor& xb = b.inputs[1].second.tensor();
  const Tensor& xc = c.inputs[1].second.tensor();
  EXPECT_EQ(xa.data<float>()[0], xb.data<float>()[0]);  // seeded: same set, same values
  EXPECT_NE(xa.data<float>()[0], xc.data<float>()[0]);
  EXPECT_EQ(a.inputs[2].second.tensor().data<int64_t>()[5], 1);

  GeneratedSet shortest = GenerateSet(*plan, o, 2, "shortest", 1);
  EXPECT_EQ(shortest.inputs[0].second.tensor().shape(), (Shape{1, 1}));
  GeneratedSet large = GenerateSet(*plan, o, 3, "large", 0);
  EXPECT_EQ(large.inputs[0].second.tensor().data<int64_t>()[0], 29);
  GeneratedSet zeros = GenerateSet(*plan, o, 4, "zeros", 0);
  EXPECT_EQ(zeros.inputs[1].second.tensor().data<float>()[2], 0.0f);
}

TEST(GoldenPlan, ShapeOverrideAndErrors) {
  ir::Graph g = EmbeddingGraph();
  CaptureOptions o;
  o.shapes["ids"] = {8, 5};
  o.ranges["x"] = {2, 3};
  auto plan = PlanCapture(g, o);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->symbols.at("batch"), 8);  // shared symbols follow --shape
  EXPECT_EQ(plan->symbols.at("seq"), 5);
  EXPECT_TRUE(plan->seq_symbols.empty());
  GeneratedSet s = GenerateSet(*plan, o, 0, "random", 0);
  EXPECT_EQ(s.inputs[1].second.tensor().shape(), (Shape{8, 3}));
  for (float v : s.inputs[1].second.tensor().span<float>()) {
    EXPECT_GE(v, 2.0f);
    EXPECT_LE(v, 3.0f);
  }
  CaptureOptions bad;
  bad.shapes["nope"] = {1};
  EXPECT_EQ(PlanCapture(g, bad).status().code(), StatusCode::kUsage);
  CaptureOptions rank;
  rank.shapes["x"] = {1, 3, 1};
  EXPECT_EQ(PlanCapture(g, rank).status().code(), StatusCode::kUsage);
  CaptureOptions fixed;
  fixed.shapes["x"] = {1, 4};
  EXPECT_EQ(PlanCapture(g, fixed).status().code(), StatusCode::kUsage);
}

TEST(GoldenDir, WriteLoadAndRefuse) {
  fs::path dir = fs::temp_directory_path() / "ferry_golden_test" / "g";
  fs::remove_all(dir.parent_path());
  ir::Graph g;
  g.inputs.push_back(Input("x", DType::kFloat, {Fixed(2)}));
  ir::ValueInfo out = Input("y", DType::kFloat, {Fixed(2)});
  g.outputs.push_back(out);
  CapturedSet cs{"random",
                 {{"x", Value(Tensor::FromVector<float>({1, 2}, {2}))}},
                 {{"y", Value(Tensor::FromVector<float>({3, 4}, {2}))}}};
  ASSERT_TRUE(WriteGoldenDir(dir.string(), {cs, cs}, "{}", false).ok());
  EXPECT_TRUE(fs::exists(dir / "test_data_set_1" / "output_0.pb"));
  EXPECT_TRUE(fs::exists(dir / "golden.json"));
  EXPECT_EQ(WriteGoldenDir(dir.string(), {cs}, "{}", false).code(), StatusCode::kInvalid);
  ASSERT_TRUE(WriteGoldenDir(dir.string(), {cs}, "{}", true).ok());
  EXPECT_FALSE(fs::exists(dir / "test_data_set_1"));
  // Nothing but the folder itself is left next to it (no temp folders).
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir.parent_path())) entries += !e.path().empty();
  EXPECT_EQ(entries, 1);

  DataReaders readers{
      [](const std::string& p, const ir::TypeInfo& t) { return ir::ReadValuePb(p, t); }, nullptr};
  auto sets = LoadDataSets(dir.string(), g, readers, true);
  ASSERT_TRUE(sets.ok()) << sets.status().message();
  ASSERT_EQ(sets->size(), 1u);
  EXPECT_EQ((*sets)[0].inputs[0].first, "x");
  EXPECT_EQ((*sets)[0].expected[0].second.tensor().data<float>()[1], 4.0f);
  EXPECT_EQ(LoadDataSets((dir / "missing").string(), g, readers, true).status().code(),
            StatusCode::kInvalid);
  fs::remove_all(dir.parent_path());
}

TEST(LayerCapture, FirstFailedAndUnmatched) {
  std::string spill;
  {
    auto cap = LayerCapture::Create([](const std::string&) { return Tolerance{1e-3, 0}; });
    ASSERT_TRUE(cap.ok());
    spill = (*cap)->dir();
    ir::Node n1, n2, n3;
    n1.name = "a";
    n1.op_type = "Relu";
    n2.name = "b";
    n2.op_type = "Conv";
    n3.name = "c";
    n3.op_type = "Add";
    auto ref = (*cap)->ReferenceObserver(0);
    ref(n1, "t1", Value(Tensor::FromVector<float>({1, 2}, {2})));
    ref(n2, "t2", Value(Tensor::FromVector<float>({3, 4}, {2})));
    ref(n3, "t3", Value(Tensor::FromVector<float>({5, 6}, {2})));
    EXPECT_TRUE(fs::exists(spill + "/s0_1.bin"));
    auto cand = (*cap)->CandidateObserver(0);
    cand(n1, "t1", Value(Tensor::FromVector<float>({1, 2}, {2})));
    cand(n2, "t2", Value(Tensor::FromVector<float>({3, 4.5f}, {2})));
    cand(n3, "other", Value(Tensor::FromVector<float>({5, 6}, {2})));
    EXPECT_FALSE(fs::exists(spill + "/s0_1.bin"));  // compared, then deleted
    ASSERT_TRUE((*cap)->status().ok());
    std::vector<LayerRow> rows = (*cap)->Finish();
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_EQ(rows[0].state, LayerRow::State::kCompared);
    EXPECT_FALSE(rows[0].failed());
    EXPECT_TRUE(rows[1].failed());
    EXPECT_DOUBLE_EQ(rows[1].stats.max_abs, 0.5);
    EXPECT_EQ(rows[2].state, LayerRow::State::kUnmatched);
    EXPECT_EQ(FirstFailedLayer(rows), 1);
    EXPECT_EQ((*cap)->candidate_only(), 1);
  }
  EXPECT_FALSE(fs::exists(spill));  // the spill folder is gone with the capture
}

TEST(NanWatch, FirstNonFinite) {
  NanWatch w;
  auto obs = w.Observer("set0");
  ir::Node a, b;
  a.name = "log0";
  a.op_type = "Log";
  b.name = "div0";
  b.op_type = "Div";
  obs(a, "ok", Value(Tensor::FromVector<float>({1, 2}, {2})));
  obs(b, "bad", Value(Tensor::FromVector<float>({std::nanf(""), 1.0f / 0.0f}, {2})));
  obs(a, "worse", Value(Tensor::FromVector<float>({std::nanf(""), std::nanf("")}, {2})));
  ASSERT_TRUE(w.finding().found);
  EXPECT_EQ(w.finding().node, "div0");
  EXPECT_EQ(w.finding().index, 1);
  EXPECT_EQ(w.finding().counts.nan, 1);
  EXPECT_EQ(w.finding().counts.inf, 1);
}

TEST(NanWatch, OriginNotPropagation) {
  NanWatch w;
  w.Known("x", Value(Tensor::FromVector<float>({1, 2}, {2})));
  auto obs = w.Observer("set0");
  float inf = std::numeric_limits<float>::infinity();
  ir::Node k, add, sub;
  k.name = "mask";
  k.op_type = "Constant";  // model data: a -inf mask constant is not a finding
  add.name = "add_mask";
  add.op_type = "Add";
  add.inputs = {"x", "m"};
  sub.name = "sub_inf";
  sub.op_type = "Sub";
  sub.inputs = {"s1", "s1"};
  obs(k, "m", Value(Tensor::FromVector<float>({0, -inf}, {2})));
  obs(add, "s1", Value(Tensor::FromVector<float>({1, -inf}, {2})));  // Inf came in: propagation
  EXPECT_FALSE(w.finding().found);
  obs(sub, "s2", Value(Tensor::FromVector<float>({0, std::nanf("")}, {2})));  // -inf - -inf
  ASSERT_TRUE(w.finding().found);
  EXPECT_EQ(w.finding().node, "sub_inf");
  EXPECT_EQ(w.finding().index, 2);
}

}  // namespace
}  // namespace ferry::verify

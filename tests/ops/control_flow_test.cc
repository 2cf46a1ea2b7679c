// If, Loop and Scan: bodies built from Identity nodes, with outer-scope reads.
#include "ops/test_util.h"

namespace ferry::testing {
namespace {

ir::Node MakeNode(const std::string& op, std::vector<std::string> ins,
                  std::vector<std::string> outs) {
  ir::Node n;
  n.op_type = op;
  n.name = op + "_" + (outs.empty() ? std::string("x") : outs[0]);
  n.inputs = std::move(ins);
  n.outputs = std::move(outs);
  return n;
}

void AddIntsAttr(ir::Node* n, const std::string& name, std::vector<int64_t> v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInts;
  a.ints = std::move(v);
  n->attributes.push_back(std::move(a));
}

void AddIntAttr(ir::Node* n, const std::string& name, int64_t v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInt;
  a.i = v;
  n->attributes.push_back(std::move(a));
}

void AddGraphAttr(ir::Node* n, const std::string& name, std::unique_ptr<ir::Graph> g) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kGraph;
  a.g = std::move(g);
  n->attributes.push_back(std::move(a));
}

// A graph with the given input and output names and Identity nodes out <- in.
std::unique_ptr<ir::Graph> IdentityGraph(std::vector<std::string> ins,
                                         std::vector<std::pair<std::string, std::string>> ids,
                                         std::vector<std::string> outs) {
  auto g = std::make_unique<ir::Graph>();
  for (auto& i : ins) g->inputs.push_back({i, {}, ""});
  for (auto& [out, in] : ids) g->nodes.push_back(MakeNode("Identity", {in}, {out}));
  for (auto& o : outs) g->outputs.push_back({o, {}, ""});
  return g;
}

// Runs a one-node model (plus graph inputs `feeds`) at `opset`.
Result<std::vector<Value>> RunModel(ir::Node node, std::vector<std::pair<std::string, Value>> feeds,
                                    int64_t opset) {
  auto m = std::make_shared<ir::Model>();
  m->ir_version = 8;
  m->opset_imports.push_back({"", opset});
  for (const auto& [name, v] : feeds) m->graph.inputs.push_back({name, {}, ""});
  for (const auto& o : node.outputs) m->graph.outputs.push_back({o, {}, ""});
  m->graph.nodes.push_back(std::move(node));
  FERRY_ASSIGN_OR_RETURN(auto s, runtime::Session::Create(m));
  return s->Run(feeds);
}

std::vector<float> Floats(const Tensor& t) {
  return {t.data<float>(), t.data<float>() + t.size()};
}

TEST(ControlFlow, IfPicksBranchAndReadsOuterScope) {
  for (bool cond : {true, false}) {
    ir::Node n = MakeNode("If", {"c"}, {"y"});
    AddGraphAttr(&n, "then_branch", IdentityGraph({}, {{"t", "a"}}, {"t"}));
    AddGraphAttr(&n, "else_branch", IdentityGraph({}, {{"e", "b"}}, {"e"}));
    auto r = RunModel(std::move(n),
                      {{"c", Value(Tensor::FromVector<bool>({cond}, {}))},
                       {"a", Value(Tensor::FromVector<float>({1, 2}, {2}))},
                       {"b", Value(Tensor::FromVector<float>({7, 8, 9}, {3}))}},
                      13);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(Floats(r.value()[0].tensor()),
              cond ? std::vector<float>({1, 2}) : std::vector<float>({7, 8, 9}));
  }
}

// Loop: carried value <- iteration number, scan outputs <- iteration number and outer 'x'.
TEST(ControlFlow, LoopCarriesAndStacksScanOutputs) {
  ir::Node n = MakeNode("Loop", {"M", "", "v0"}, {"v", "iters", "xs"});
  AddGraphAttr(&n, "body",
               IdentityGraph({"i", "cond_in", "v_in"},
                             {{"cond_out", "cond_in"}, {"v_out", "i"}, {"s_i", "i"}, {"s_x", "x"}},
                             {"cond_out", "v_out", "s_i", "s_x"}));
  auto r = RunModel(std::move(n),
                    {{"M", Value(Tensor::FromVector<int64_t>({3}, {}))},
                     {"v0", Value(Tensor::FromVector<int64_t>({-1}, {}))},
                     {"x", Value(Tensor::FromVector<float>({5, 6}, {2}))}},
                    16);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{2}));
  EXPECT_EQ(r.value()[1].tensor().shape(), (Shape{3}));
  EXPECT_EQ(r.value()[1].tensor().ToInt64Vector(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(r.value()[2].tensor().shape(), (Shape{3, 2}));
  EXPECT_EQ(Floats(r.value()[2].tensor()), (std::vector<float>{5, 6, 5, 6, 5, 6}));
}

// A trip count of 2^40 over a scan output of 2 floats implies 8 TiB of stacked output: refused
// in the first iteration with the budget's error (it used to gather until killed: issue 19's
// black-box campaign, tools/fuzz_campaign.py).
TEST(ControlFlow, LoopScanOutputsPastTheMemoryBudgetAreRefused) {
  ir::Node n = MakeNode("Loop", {"M", ""}, {"xs"});
  AddGraphAttr(&n, "body",
               IdentityGraph({"i", "cond_in"}, {{"cond_out", "cond_in"}, {"s_x", "x"}},
                             {"cond_out", "s_x"}));
  auto r = RunModel(std::move(n),
                    {{"M", Value(Tensor::FromVector<int64_t>({int64_t{1} << 40}, {}))},
                     {"x", Value(Tensor::FromVector<float>({5, 6}, {2}))}},
                    16);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  for (const char* part :
       {"Loop 'Loop_xs'", "1099511627776 iterations", "float32 [2]", "8.0 TiB", "memory budget"})
    EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
}

TEST(ControlFlow, LoopZeroTripsReturnsInitialValues) {
  ir::Node n = MakeNode("Loop", {"M", "", "v0"}, {"v"});
  AddGraphAttr(&n, "body",
               IdentityGraph({"i", "cond_in", "v_in"}, {{"cond_out", "cond_in"}, {"v_out", "v_in"}},
                             {"cond_out", "v_out"}));
  auto r = RunModel(std::move(n),
                    {{"M", Value(Tensor::FromVector<int64_t>({0}, {}))},
                     {"v0", Value(Tensor::FromVector<float>({4, 5}, {2}))}},
                    13);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Floats(r.value()[0].tensor()), (std::vector<float>{4, 5}));
}

TEST(ControlFlow, LoopWithoutTripCountOrCondIsUnsupported) {
  ir::Node n = MakeNode("Loop", {"", "", "v0"}, {"v"});
  AddGraphAttr(&n, "body",
               IdentityGraph({"i", "cond_in", "v_in"}, {{"cond_out", "cond_in"}, {"v_out", "v_in"}},
                             {"cond_out", "v_out"}));
  auto r = RunModel(std::move(n), {{"v0", Value(Tensor::FromVector<float>({1}, {1}))}}, 13);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("neither M nor cond"), std::string::npos)
      << r.status().message();
}

TEST(ControlFlow, LoopBodyArityMismatchIsInvalid) {
  ir::Node n = MakeNode("Loop", {"M", "", "v0"}, {"v"});
  AddGraphAttr(&n, "body",
               IdentityGraph({"i", "cond_in"}, {{"cond_out", "cond_in"}}, {"cond_out"}));
  auto r = RunModel(std::move(n),
                    {{"M", Value(Tensor::FromVector<int64_t>({2}, {}))},
                     {"v0", Value(Tensor::FromVector<float>({1}, {1}))}},
                    13);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("body has 2 inputs, expected 3"), std::string::npos)
      << r.status().message();
}

// Scan body: new state <- element, scan output <- previous state. Reversed input direction,
// output stacked along axis 1 in reverse.
TEST(ControlFlow, Scan9DirectionsAndAxes) {
  ir::Node n = MakeNode("Scan", {"s0", "x"}, {"s", "y"});
  AddIntAttr(&n, "num_scan_inputs", 1);
  AddIntsAttr(&n, "scan_input_directions", {1});
  AddIntsAttr(&n, "scan_output_axes", {1});
  AddIntsAttr(&n, "scan_output_directions", {1});
  AddGraphAttr(&n, "body",
               IdentityGraph({"st", "el"}, {{"st_out", "el"}, {"so", "st"}}, {"st_out", "so"}));
  auto r = RunModel(std::move(n),
                    {{"s0", Value(Tensor::FromVector<float>({0, 0}, {2}))},
                     {"x", Value(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {3, 2}))}},
                    16);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Steps see x[2], x[1], x[0]; scan outputs (s0, x[2], x[1]) are written at 2, 1, 0.
  EXPECT_EQ(Floats(r.value()[0].tensor()), (std::vector<float>{1, 2}));
  EXPECT_EQ(r.value()[1].tensor().shape(), (Shape{2, 3}));
  EXPECT_EQ(Floats(r.value()[1].tensor()), (std::vector<float>{3, 5, 0, 4, 6, 0}));
}

TEST(ControlFlow, Scan8SequenceLensPadsOutputs) {
  ir::Node n = MakeNode("Scan", {"lens", "s0", "x"}, {"s", "y"});
  AddIntAttr(&n, "num_scan_inputs", 1);
  AddGraphAttr(&n, "body",
               IdentityGraph({"st", "el"}, {{"st_out", "el"}, {"so", "el"}}, {"st_out", "so"}));
  auto r = RunModel(std::move(n),
                    {{"lens", Value(Tensor::FromVector<int64_t>({2, 1}, {2}))},
                     {"s0", Value(Tensor::FromVector<float>({0, 0}, {2, 1}))},
                     {"x", Value(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3, 1}))}},
                    8);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Floats(r.value()[0].tensor()), (std::vector<float>{2, 4}));
  EXPECT_EQ(Floats(r.value()[1].tensor()), (std::vector<float>{1, 2, 0, 4, 0, 0}));
}

}  // namespace
}  // namespace ferry::testing

// Sequence and optional ops, chained in small graphs.
#include "ops/test_util.h"

namespace ferry::testing {
namespace {

ir::Node MakeNode(const std::string& op, std::vector<std::string> ins,
                  std::vector<std::string> outs) {
  ir::Node n;
  n.op_type = op;
  n.name = op + "_" + outs[0];
  n.inputs = std::move(ins);
  n.outputs = std::move(outs);
  return n;
}

ir::Node WithInt(ir::Node n, const std::string& name, int64_t v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInt;
  a.i = v;
  n.attributes.push_back(std::move(a));
  return n;
}

Result<std::vector<Value>> RunGraph(std::vector<ir::Node> nodes,
                                    std::vector<std::pair<std::string, Value>> feeds,
                                    std::vector<std::string> outputs, int64_t opset = 17) {
  auto m = std::make_shared<ir::Model>();
  m->ir_version = 8;
  m->opset_imports.push_back({"", opset});
  for (const auto& [name, v] : feeds) m->graph.inputs.push_back({name, {}, ""});
  for (const auto& o : outputs) m->graph.outputs.push_back({o, {}, ""});
  m->graph.nodes = std::move(nodes);
  FERRY_ASSIGN_OR_RETURN(auto s, runtime::Session::Create(m));
  return s->Run(feeds);
}

std::vector<float> Floats(const Tensor& t) {
  return {t.data<float>(), t.data<float>() + t.size()};
}

TEST(Sequence, InsertEraseAtLength) {
  std::vector<ir::Node> nodes;
  nodes.push_back(MakeNode("SequenceConstruct", {"a", "b"}, {"s1"}));
  nodes.push_back(MakeNode("SequenceInsert", {"s1", "c", "p0"}, {"s2"}));  // c, a, b
  nodes.push_back(MakeNode("SequenceErase", {"s2", "pm1"}, {"s3"}));       // c, a
  nodes.push_back(MakeNode("SequenceAt", {"s3", "pm1"}, {"y"}));           // a
  nodes.push_back(MakeNode("SequenceLength", {"s3"}, {"n"}));
  auto r = RunGraph(std::move(nodes),
                    {{"a", Value(Tensor::FromVector<float>({1}, {1}))},
                     {"b", Value(Tensor::FromVector<float>({2, 3}, {2}))},
                     {"c", Value(Tensor::FromVector<float>({4, 5, 6}, {3}))},
                     {"p0", Value(Tensor::FromVector<int64_t>({0}, {}))},
                     {"pm1", Value(Tensor::FromVector<int32_t>({-1}, {}))}},
                    {"s3", "y", "n"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r.value()[0].is_sequence());
  ASSERT_EQ(r.value()[0].sequence().size(), 2u);
  EXPECT_EQ(Floats(r.value()[0].sequence()[0]), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(Floats(r.value()[1].tensor()), (std::vector<float>{1}));
  EXPECT_EQ(r.value()[2].tensor().ToInt64Vector(), (std::vector<int64_t>{2}));
}

TEST(Sequence, SplitThenConcatWithNewAxis) {
  std::vector<ir::Node> nodes;
  nodes.push_back(
      WithInt(WithInt(MakeNode("SplitToSequence", {"x"}, {"s"}), "axis", 1), "keepdims", 0));
  nodes.push_back(
      WithInt(WithInt(MakeNode("ConcatFromSequence", {"s"}, {"y"}), "axis", 0), "new_axis", 1));
  nodes.push_back(WithInt(MakeNode("SplitToSequence", {"x", "sp"}, {"s2"}), "axis", 1));
  auto r = RunGraph(std::move(nodes),
                    {{"x", Value(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3}))},
                     {"sp", Value(Tensor::FromVector<int64_t>({2}, {}))}},
                    {"y", "s2"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Columns stacked as rows: the transpose.
  EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{3, 2}));
  EXPECT_EQ(Floats(r.value()[0].tensor()), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  // Chunks of 2 along axis 1 of a length-3 axis: sizes 2 and 1.
  ASSERT_EQ(r.value()[1].sequence().size(), 2u);
  EXPECT_EQ(r.value()[1].sequence()[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(Floats(r.value()[1].sequence()[1]), (std::vector<float>{3, 6}));
}

TEST(Sequence, SequenceAtOutOfRangeIsInvalid) {
  std::vector<ir::Node> nodes;
  nodes.push_back(MakeNode("SequenceConstruct", {"a"}, {"s"}));
  nodes.push_back(MakeNode("SequenceAt", {"s", "p"}, {"y"}));
  auto r = RunGraph(std::move(nodes),
                    {{"a", Value(Tensor::FromVector<float>({1}, {1}))},
                     {"p", Value(Tensor::FromVector<int64_t>({3}, {}))}},
                    {"y"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("position 3 is out of range [-1, 0]"), std::string::npos)
      << r.status().message();
}

TEST(Sequence, OptionalRoundTrip) {
  std::vector<ir::Node> nodes;
  nodes.push_back(MakeNode("Optional", {"a"}, {"o"}));
  nodes.push_back(MakeNode("OptionalHasElement", {"o"}, {"has"}));
  nodes.push_back(MakeNode("OptionalGetElement", {"o"}, {"y"}));
  nodes.push_back(MakeNode("Optional", {}, {"empty"}));
  nodes.push_back(MakeNode("OptionalHasElement", {"empty"}, {"has_empty"}));
  nodes.push_back(MakeNode("OptionalHasElement", {""}, {"has_omitted"}));
  auto r = RunGraph(std::move(nodes), {{"a", Value(Tensor::FromVector<float>({7, 8}, {2}))}},
                    {"has", "y", "has_empty", "has_omitted"}, 18);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r.value()[0].tensor().data<bool>()[0]);
  EXPECT_EQ(Floats(r.value()[1].tensor()), (std::vector<float>{7, 8}));
  EXPECT_FALSE(r.value()[2].tensor().data<bool>()[0]);
  EXPECT_FALSE(r.value()[3].tensor().data<bool>()[0]);
}

TEST(Sequence, OptionalGetElementOfEmptyIsInvalid) {
  std::vector<ir::Node> nodes;
  nodes.push_back(MakeNode("Optional", {}, {"empty"}));
  nodes.push_back(MakeNode("OptionalGetElement", {"empty"}, {"y"}));
  auto r = RunGraph(std::move(nodes), {}, {"y"}, 18);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("optional is empty"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace ferry::testing

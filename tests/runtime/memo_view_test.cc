// The runtime's shape-arithmetic memoization, views and shape-only steps (src/runtime/session.cc,
// cpu provider): a step whose inputs are constants or memoized outputs (Shape/Size: keyed by the
// input's shape) reuses its last outputs while its inputs are unchanged; Reshape-like ops and
// Transposes that move only size-1 dims share their input's storage; a step read only by Shape
// makes only its output's shape. Every run must equal the reference provider's.
#include <map>

#include "cpu/cpu_harness.h"

namespace ferry::cpu_test {
namespace {

std::map<std::string, std::string> Providers(const Session& s) {
  std::map<std::string, std::string> p;
  for (const auto& r : s.node_report()) p[r.name] = r.provider;
  return p;
}

Tensor Ints(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::FromVector<int64_t>(v, {n});
}

void ExpectEqual(const std::vector<Value>& got, const std::vector<Value>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    const Tensor& g = got[k].tensor();
    const Tensor& w = want[k].tensor();
    ASSERT_EQ(g.shape(), w.shape()) << "output " << k;
    ASSERT_EQ(g.dtype(), w.dtype());
    for (int64_t i = 0; i < g.size(); ++i)
      ASSERT_EQ(g.GetAsDouble(i), w.GetAsDouble(i)) << "output " << k << " element " << i;
  }
}

// Runs `feeds` in order on one cpu session and one reference session; every run must match.
std::unique_ptr<Session> RunSequence(
    const std::shared_ptr<const ir::Model>& model,
    const std::vector<std::vector<std::pair<std::string, Value>>>& feeds) {
  SessionOptions ro;
  ro.provider = "reference";
  auto ref = Session::Create(model, ro);
  EXPECT_TRUE(ref.ok()) << ref.status().message();
  auto cpu = Session::Create(model, {});
  EXPECT_TRUE(cpu.ok()) << cpu.status().message();
  if (!ref.ok() || !cpu.ok()) return nullptr;
  for (size_t r = 0; r < feeds.size(); ++r) {
    auto want = (*ref)->Run(feeds[r]);
    auto got = (*cpu)->Run(feeds[r]);
    EXPECT_TRUE(want.ok()) << want.status().message();
    EXPECT_TRUE(got.ok()) << got.status().message();
    if (!want.ok() || !got.ok()) return nullptr;
    SCOPED_TRACE("run " + std::to_string(r));
    ExpectEqual(*got, *want);
  }
  return std::move(*cpu);
}

// y reshaped to [x.dim0 * 2, -1] where the target comes from x's shape through the torch-style
// chain Shape -> Gather -> Mul -> Unsqueeze -> Concat; x goes through a Relu read only by Shape.
GraphBuilder ShapeChain() {
  GraphBuilder b;
  b.Opset(17);
  b.Input("x", Tensor(DType::kFloat, {2, 3})).Input("y", Tensor(DType::kFloat, {12}));
  b.Const("zero", Tensor::FromVector<int64_t>({0}, {}))
      .Const("two", Tensor::FromVector<int64_t>({2}, {}));
  b.Const("axes", Ints({0})).Const("minus1", Ints({-1}));
  b.Node("Relu", {"x"}, {"xr"});
  b.Node("Shape", {"xr"}, {"s"});
  SetInt(b.Node("Gather", {"s", "zero"}, {"d0"}), "axis", 0);
  b.Node("Mul", {"d0", "two"}, {"d0x2"});
  b.Node("Unsqueeze", {"d0x2", "axes"}, {"u"});
  SetInt(b.Node("Concat", {"u", "minus1"}, {"target"}), "axis", 0);
  b.Node("Reshape", {"y", "target"}, {"out"});
  b.Output("out");
  return b;
}

std::vector<std::pair<std::string, Value>> Feeds(Shape x, int64_t ny) {
  Tensor y = Rand({ny}, 7);
  return {{"x", Value(Rand(x, 3))}, {"y", Value(std::move(y))}};
}

TEST(RuntimeMemo, ReusedWhileShapesStayAndRecomputedWhenTheyChange) {
  GraphBuilder b = ShapeChain();
  auto s = RunSequence(b.model(), {Feeds({2, 3}, 12), Feeds({2, 3}, 12)});
  ASSERT_TRUE(s);
  auto p = Providers(*s);
  EXPECT_EQ(p["Shape_1"], "cpu (memoized)");
  EXPECT_EQ(p["Concat_5"], "cpu (memoized)");
  EXPECT_EQ(p["Relu_0"], "cpu (shape only)");
  EXPECT_EQ(p["Reshape_6"], "reference");  // the output is a graph output: copied, no view
  // x's shape changes (the target with it), then changes back: every run as the reference.
  s = RunSequence(b.model(), {Feeds({2, 3}, 12), Feeds({3, 2}, 12), Feeds({3, 2}, 12),
                              Feeds({1, 5}, 12), Feeds({2, 3}, 12), Feeds({2, 7}, 12)});
  ASSERT_TRUE(s);
  // The same element count, another shape: Shape must not be reused.
  s = RunSequence(b.model(), {Feeds({2, 3}, 12), Feeds({6, 1}, 12), Feeds({2, 3}, 12)});
  ASSERT_TRUE(s);
}

TEST(RuntimeMemo, ValueDependentStepsAreNotCached) {
  // Reshape(y, Concat(Unsqueeze(Gather(t, 0) * Gather(Shape(x), 0)), [-1])): t is a graph input,
  // so the Gather of its values, the Mul and everything after must run every time.
  GraphBuilder b;
  b.Opset(17);
  b.Input("x", Tensor(DType::kFloat, {2, 3}))
      .Input("t", Ints({1, 1}))
      .Input("y", Tensor(DType::kFloat, {12}));
  b.Const("zero", Tensor::FromVector<int64_t>({0}, {}));
  b.Const("axes", Ints({0})).Const("minus1", Ints({-1}));
  b.Node("Shape", {"x"}, {"s"});
  SetInt(b.Node("Gather", {"s", "zero"}, {"d0"}), "axis", 0);
  SetInt(b.Node("Gather", {"t", "zero"}, {"t0"}), "axis", 0);
  b.Node("Mul", {"d0", "t0"}, {"m"});
  b.Node("Unsqueeze", {"m", "axes"}, {"u"});
  SetInt(b.Node("Concat", {"u", "minus1"}, {"target"}), "axis", 0);
  b.Node("Reshape", {"y", "target"}, {"r"});
  b.Node("Relu", {"r"}, {"out"});
  b.Output("out");
  auto feeds = [](int64_t t0) {
    return std::vector<std::pair<std::string, Value>>{
        {"x", Value(Rand({2, 3}, 1))}, {"t", Value(Ints({t0, 5}))}, {"y", Value(Rand({12}, 2))}};
  };
  auto s = RunSequence(b.model(), {feeds(1), feeds(2), feeds(3), feeds(3), feeds(1), feeds(6)});
  ASSERT_TRUE(s);
  auto p = Providers(*s);
  EXPECT_EQ(p["Shape_0"], "cpu (memoized)");
  EXPECT_EQ(p["Gather_1"], "cpu (memoized)");
  EXPECT_EQ(p["Gather_2"], "cpu");
  EXPECT_NE(p["Mul_3"], "cpu (memoized)");
  EXPECT_NE(p["Unsqueeze_4"], "cpu (memoized)");
  EXPECT_NE(p["Concat_5"], "cpu (memoized)");
  EXPECT_EQ(p["Reshape_6"], "cpu (view)");
}

TEST(RuntimeView, ReshapeAndTransposeViewsOutliveTheirInputsLastReader) {
  // a = Relu(x); v = Reshape(a) and w = Transpose(Unsqueeze(a)) (size-1 dims moved) are read
  // after a's own last reader, with other arena tensors of a's size made in between; a
  // Transpose that really moves data stays a copy.
  GraphBuilder b;
  b.Opset(17);
  b.Input("x", Rand({4, 6}, 1, -1.f, 1.f)).Input("z", Rand({4, 6}, 2));
  b.Const("shape", Ints({6, 4})).Const("axes", Ints({0, 2}));
  b.Node("Relu", {"x"}, {"a"});                                       // 0
  b.Node("Reshape", {"a", "shape"}, {"v"});                           // 1
  b.Node("Unsqueeze", {"a", "axes"}, {"ua"});                         // 2: [1,4,1,6]
  SetInts(b.Node("Transpose", {"ua"}, {"w"}), "perm", {2, 1, 0, 3});  // 3: [1,4,1,6], a view
  SetInts(b.Node("Transpose", {"a"}, {"at"}), "perm", {1, 0});        // 4: [6,4], a copy
  b.Node("Neg", {"z"}, {"n1"});                                       // 5
  b.Node("Abs", {"n1"}, {"n2"});                                      // 6
  b.Node("Relu", {"n2"}, {"n3"});                                     // 7
  b.Node("Reshape", {"n3", "shape"}, {"n4"});                         // 8
  b.Node("Add", {"v", "n4"}, {"s1"});                                 // 9
  b.Node("Add", {"s1", "at"}, {"s2"});                                // 10
  b.Node("Reshape", {"w", "shape"}, {"w2"});                          // 11
  b.Node("Mul", {"s2", "w2"}, {"out"});                               // 12
  b.Output("out");
  std::vector<std::vector<std::pair<std::string, Value>>> runs;
  for (uint32_t r = 0; r < 4; ++r)
    runs.push_back(
        {{"x", Value(Rand({4, 6}, 10 + r, -1.f, 1.f))}, {"z", Value(Rand({4, 6}, 20 + r))}});
  auto s = RunSequence(b.model(), runs);
  ASSERT_TRUE(s);
  auto p = Providers(*s);
  EXPECT_EQ(p["Reshape_1"], "cpu (view)");
  EXPECT_EQ(p["Transpose_3"], "cpu (view)");
  EXPECT_EQ(p["Transpose_4"], "cpu");
  EXPECT_EQ(p["Reshape_11"], "cpu (view)");
}

TEST(RuntimeView, ViewOfAStepThatCopiedAtRunTime) {
  // Transpose may be a view (planned) but this one moves data, so it writes its own tensor; the
  // Reshape after it is a view of that tensor, which must live until the Reshape's reader (the
  // zoo BERT's attention output Transpose -> Reshape -> Gemm).
  GraphBuilder b;
  b.Opset(17);
  b.Input("x", Rand({2, 3, 4}, 1)).Input("z", Rand({6, 4}, 2));
  b.Const("shape", Ints({6, 4}));
  b.Node("Relu", {"x"}, {"a"});                                   // 0
  SetInts(b.Node("Transpose", {"a"}, {"t"}), "perm", {1, 0, 2});  // 1: a copy
  b.Node("Reshape", {"t", "shape"}, {"v"});                       // 2: a view of t
  b.Node("Neg", {"z"}, {"n1"});                                   // 3
  b.Node("Abs", {"n1"}, {"n2"});                                  // 4
  b.Node("Relu", {"n2"}, {"n3"});                                 // 5
  b.Node("Add", {"v", "n3"}, {"out"});                            // 6
  b.Output("out");
  std::vector<std::vector<std::pair<std::string, Value>>> runs;
  for (uint32_t r = 0; r < 3; ++r)
    runs.push_back({{"x", Value(Rand({2, 3, 4}, 10 + r))}, {"z", Value(Rand({6, 4}, 20 + r))}});
  auto s = RunSequence(b.model(), runs);
  ASSERT_TRUE(s);
  auto p = Providers(*s);
  EXPECT_EQ(p["Transpose_1"], "cpu");
  EXPECT_EQ(p["Reshape_2"], "cpu (view)");
}

}  // namespace
}  // namespace ferry::cpu_test
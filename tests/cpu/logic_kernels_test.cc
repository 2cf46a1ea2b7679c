// The cpu provider's comparison / logic / Where / Cast / GlobalMaxPool kernels (logic.cc)
// against the reference kernels, bit for bit, on broadcasting shapes (magika's one-hot Equal:
// [N,L,1] against [1,1,257]), with each row table the CPU has (AVX-512, AVX2, baseline), and the
// column Conv (conv1d.cc: [N,C,H,1] run as a row) and the last-axis Pad (movement.cc) against the
// reference.
#include <gtest/gtest.h>

#include <limits>

#include "cpu/cpu_harness.h"
#include "ops/cpu/logic.h"

namespace ferry::cpu_test {
namespace {

using ops::cpu::LogicRows;

// The row tables to run with: every one this CPU has.
std::vector<const LogicRows*> Tables() {
  std::vector<const LogicRows*> t = {&ops::cpu::BaselineLogic()};
  if (ops::cpu::Avx2Logic()) t.push_back(ops::cpu::Avx2Logic());
  if (ops::cpu::Avx512Logic()) t.push_back(ops::cpu::Avx512Logic());
  return t;
}

struct ForceTable {
  explicit ForceTable(const LogicRows* t) { ops::cpu::SetLogicTableForTesting(t); }
  ~ForceTable() { ops::cpu::SetLogicTableForTesting(nullptr); }
};

Tensor Bools(const Shape& s, uint32_t seed) {
  return RandInts<bool>(DType::kBool, s, 0, 1, seed);
}

Tensor Typed(DType dt, const Shape& s, uint32_t seed) {
  switch (dt) {
    case DType::kInt32:
      return RandInts<int32_t>(dt, s, -3, 3, seed);
    case DType::kInt64:
      return RandInts<int64_t>(dt, s, -3, 3, seed);
    case DType::kBool:
      return Bools(s, seed);
    default: {  // few distinct values, so equality happens; one NaN
      Tensor t = RandInts<float>(DType::kFloat, s, -3, 3, seed);
      if (t.size() > 2) t.data<float>()[1] = std::numeric_limits<float>::quiet_NaN();
      return t;
    }
  }
}

// Shape pairs: equal, scalar either side, row / column broadcast, magika's one-hot.
const std::pair<Shape, Shape> kPairs[] = {
    {{3, 70}, {3, 70}}, {{5, 33}, {}},          {{}, {4, 9}}, {{2, 3, 1}, {1, 1, 257}},
    {{7, 1}, {1, 40}},  {{2, 1, 5}, {3, 1}},    {{1}, {1}},   {{4, 300, 1}, {1, 1, 130}},
    {{0, 3}, {1, 3}},   {{6, 2, 4}, {6, 2, 4}},
};

void CheckBinary(const std::string& op, DType dt, const Shape& a, const Shape& b, uint32_t seed) {
  GraphBuilder g;
  g.Input("a", Typed(dt, a, seed));
  g.Input("b", Typed(dt, b, seed + 1));
  g.Node(op, {"a", "b"}, {"y"});
  g.Output("y");
  const auto report = ExpectMatchesReference(g, 0, 0);
  EXPECT_EQ(ProviderOfOp(report, op), "cpu") << op;
}

TEST(CpuLogic, ComparisonsAndLogicMatchReference) {
  for (const LogicRows* t : Tables()) {
    ForceTable force(t);
    SCOPED_TRACE(t->isa);
    uint32_t seed = 1;
    for (const auto& [a, b] : kPairs) {
      for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"})
        for (DType dt : {DType::kFloat, DType::kInt32, DType::kInt64})
          CheckBinary(op, dt, a, b, seed += 3);
      CheckBinary("Equal", DType::kBool, a, b, seed += 3);
      for (const char* op : {"And", "Or", "Xor"}) CheckBinary(op, DType::kBool, a, b, seed += 3);
    }
  }
}

TEST(CpuLogic, NotWhereCastMatchReference) {
  for (const LogicRows* t : Tables()) {
    ForceTable force(t);
    SCOPED_TRACE(t->isa);
    {
      GraphBuilder g;
      g.Input("x", Bools({3, 77}, 5));
      g.Node("Not", {"x"}, {"y"});
      g.Output("y");
      EXPECT_EQ(ProviderOfOp(ExpectMatchesReference(g, 0, 0), "Not"), "cpu");
    }
    const Shape wshapes[][3] = {{{4, 50}, {4, 50}, {4, 50}},
                                {{4, 1}, {1, 50}, {}},
                                {{2, 3, 1}, {3, 20}, {2, 1, 20}},
                                {{}, {5, 6}, {6}}};
    uint32_t seed = 40;
    for (const auto& s : wshapes) {
      for (DType dt : {DType::kFloat, DType::kInt64, DType::kBool}) {
        GraphBuilder g;
        g.Input("c", Bools(s[0], seed++));
        g.Input("x", Typed(dt, s[1], seed++));
        g.Input("z", Typed(dt, s[2], seed++));
        g.Node("Where", {"c", "x", "z"}, {"y"});
        g.Output("y");
        EXPECT_EQ(ProviderOfOp(ExpectMatchesReference(g, 0, 0), "Where"), "cpu");
      }
    }
    const std::pair<DType, DType> casts[] = {
        {DType::kBool, DType::kFloat},  {DType::kInt32, DType::kFloat},
        {DType::kInt64, DType::kFloat}, {DType::kInt64, DType::kInt32},
        {DType::kInt32, DType::kInt64}, {DType::kFloat, DType::kBool},
        {DType::kFloat, DType::kFloat}, {DType::kBool, DType::kInt64}};
    for (const auto& [from, to] : casts) {
      GraphBuilder g;
      g.Input("x", Typed(from, {3, 5, 41}, seed++));
      ir::Node& n = g.Node("Cast", {"x"}, {"y"});
      SetInt(n, "to", static_cast<int64_t>(to));
      g.Output("y");
      EXPECT_EQ(ProviderOfOp(ExpectMatchesReference(g, 0, 0), "Cast"), "cpu");
    }
  }
}

TEST(CpuLogic, GlobalMaxPoolMatchesReference) {
  for (const LogicRows* t : Tables()) {
    ForceTable force(t);
    SCOPED_TRACE(t->isa);
    const Shape shapes[] = {{2, 5, 508}, {1, 3, 7, 9}, {3, 4, 1}, {2, 2, 33, 1, 2}};
    uint32_t seed = 70;
    for (const Shape& s : shapes) {
      GraphBuilder g;
      Tensor x = Rand(s, seed++);
      if (s[0] == 2 && s[1] == 5) x.data<float>()[600] = std::numeric_limits<float>::quiet_NaN();
      g.Input("x", x);
      g.Node("GlobalMaxPool", {"x"}, {"y"});
      g.Output("y");
      EXPECT_EQ(ProviderOfOp(ExpectMatchesReference(g, 0, 0), "GlobalMaxPool"), "cpu");
    }
  }
}

// Pad of the last axis (movement.cc): constant (with and without a value), reflect, edge, on
// float / int64 / bool data; pads on another axis stay on the reference.
TEST(CpuLogic, LastAxisPadMatchesReference) {
  struct Case {
    const char* mode;
    DType dt;
    Shape x;
    std::vector<int64_t> pads;
    bool value, cpu;
  };
  const Case cases[] = {
      {"reflect", DType::kFloat, {1, 576}, {0, 64, 0, 64}, false, true},  // silero's STFT pad
      {"reflect", DType::kFloat, {2, 3, 9}, {0, 0, 3, 0, 0, 8}, false, true},
      {"edge", DType::kInt64, {4, 5}, {0, 2, 0, 7}, false, true},
      {"constant", DType::kFloat, {3, 7}, {0, 1, 0, 4}, true, true},
      {"constant", DType::kBool, {3, 7}, {0, 3, 0, 0}, false, true},
      {"reflect", DType::kFloat, {1, 1}, {0, 2, 0, 2}, false, true},
      {"reflect", DType::kFloat, {4, 6}, {1, 1, 0, 0}, false, false},  // another axis
  };
  uint32_t seed = 120;
  for (const Case& c : cases) {
    GraphBuilder b;
    b.Input("x", Typed(c.dt, c.x, seed++));
    b.Const("p", Int64s(c.pads));
    std::vector<std::string> in = {"x", "p"};
    if (c.value) {
      b.Const("v", Tensor::FromVector<float>({2.5f}, {}));
      in.push_back("v");
    }
    ir::Node& n = b.Node("Pad", in, {"y"});
    ir::Attribute a;
    a.name = "mode";
    a.type = ir::AttrType::kString;
    a.s = c.mode;
    n.attributes.push_back(std::move(a));
    b.Output("y");
    const auto report = ExpectMatchesReference(b, 0, 0);
    EXPECT_EQ(ProviderOfOp(report, "Pad") == "cpu", c.cpu) << c.mode;
  }
}

// A 2-D Conv over a column ([N,C,H,1], kernel [kh,1]): run as the row conv; bias, residual.
TEST(CpuLogic, ColumnConvMatchesReference) {
  struct Case {
    int64_t n, c, k, h, kh, stride, pad;
    bool bias, residual;
  };
  const Case cases[] = {{2, 16, 24, 51, 5, 1, 0, false, false},
                        {1, 7, 9, 30, 3, 2, 1, true, false},
                        {3, 8, 8, 19, 3, 1, 1, true, true}};
  uint32_t seed = 90;
  for (const Case& c : cases) {
    GraphBuilder b;
    b.Input("x", Rand({c.n, c.c, c.h, 1}, seed++));
    b.Const("w", Rand({c.k, c.c, c.kh, 1}, seed++, -0.5f, 0.5f));
    std::vector<std::string> in = {"x", "w"};
    if (c.bias) {
      b.Const("b", Rand({c.k}, seed++));
      in.push_back("b");
    }
    ir::Node& conv = b.Node("Conv", in, {"y"});
    SetInts(conv, "kernel_shape", {c.kh, 1});
    SetInts(conv, "strides", {c.stride, 1});
    SetInts(conv, "pads", {c.pad, 0, c.pad, 0});
    std::string y = "y";
    if (c.residual) {
      const int64_t ho = (c.h + 2 * c.pad - c.kh) / c.stride + 1;
      b.Input("r", Rand({c.n, c.k, ho, 1}, seed++));
      b.Node("Add", {"y", "r"}, {"s"});
      y = "s";
    }
    b.Output(y);
    const auto report = ExpectMatchesReference(b, 1e-4, 1e-5);
    EXPECT_EQ(ProviderOfOp(report, "Conv"), "cpu");
  }
}

// tf2onnx's Conv1D: Transpose(perm 0,2,1,3) of X [N, L, C, 1] then the column Conv, run as one
// row conv reading X in place (conv1d.cc's TransposeColumnConv pattern).
TEST(CpuLogic, TransposeColumnConvMatchesReference) {
  struct Case {
    int64_t n, l, c, k, kh, stride, pad;
    bool bias;
  };
  const Case cases[] = {{2, 40, 16, 24, 5, 1, 0, false}, {1, 33, 7, 9, 3, 2, 1, true}};
  uint32_t seed = 150;
  for (const Case& c : cases) {
    GraphBuilder b;
    b.Input("x", Rand({c.n, c.l, c.c, 1}, seed++));
    b.Const("w", Rand({c.k, c.c, c.kh, 1}, seed++, -0.5f, 0.5f));
    std::vector<std::string> in = {"xt", "w"};
    if (c.bias) {
      b.Const("b", Rand({c.k}, seed++));
      in.push_back("b");
    }
    SetInts(b.Node("Transpose", {"x"}, {"xt"}), "perm", {0, 2, 1, 3});
    ir::Node& conv = b.Node("Conv", in, {"y"});
    SetInts(conv, "kernel_shape", {c.kh, 1});
    SetInts(conv, "strides", {c.stride, 1});
    SetInts(conv, "pads", {c.pad, 0, c.pad, 0});
    b.Output("y");
    const auto report = ExpectMatchesReference(b, 1e-4, 1e-5);
    EXPECT_EQ(ProviderOfOp(report, "Transpose"), "cpu (TransposeColumnConv)");
  }
}

}  // namespace
}  // namespace ferry::cpu_test

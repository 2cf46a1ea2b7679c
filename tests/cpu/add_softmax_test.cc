// The AddSoftmax pattern (src/ops/cpu/norm.cc): Softmax(x [* cx] + w [* cw]) over the last axis
// as one row pass. Its output must be bit-identical to the steps run one by one on the cpu
// kernels (a run with an observer runs them unfused) and within tolerance of the reference.
#include <limits>

#include "cpu/cpu_harness.h"

namespace ferry::cpu_test {
namespace {

struct Case {
  std::string name;
  Shape x, w;
  bool scale_x, scale_w;
  bool w_first;   // Add(w', x') instead of Add(x', w')
  bool c_first;   // Mul(c, v) instead of Mul(v, c)
  int64_t axis;   // Softmax axis
  int64_t opset;  // model opset
  bool fused;     // expected to run as the pattern
};

GraphBuilder Build(const Case& c, uint32_t seed) {
  GraphBuilder b;
  b.Opset(c.opset);
  Tensor w = Rand(c.w, seed + 1, -2.f, 2.f);
  // A few masked positions (-inf), as torch's attention masks.
  for (int64_t i = 0; i < w.size(); i += 3)
    w.data<float>()[i] = -std::numeric_limits<float>::infinity();
  if (w.size() > 0) w.data<float>()[w.size() - 1] = 0.5f;
  b.Input("x", Rand(c.x, seed, -4.f, 4.f)).Input("w", std::move(w));
  b.Const("cx", Tensor::FromVector<float>({0.125f}, {}))
      .Const("cw", Tensor::FromVector<float>({1.5f}, {1}));
  std::string xs = "x", ws = "w";
  if (c.scale_x) {
    b.Node("Mul",
           c.c_first ? std::vector<std::string>{"cx", "x"} : std::vector<std::string>{"x", "cx"},
           {"xs"});
    xs = "xs";
  }
  if (c.scale_w) {
    b.Node("Mul",
           c.c_first ? std::vector<std::string>{"cw", "w"} : std::vector<std::string>{"w", "cw"},
           {"ws"});
    ws = "ws";
  }
  b.Node("Add", c.w_first ? std::vector<std::string>{ws, xs} : std::vector<std::string>{xs, ws},
         {"s"});
  SetInt(b.Node("Softmax", {"s"}, {"y"}), "axis", c.axis);
  b.Output("y");
  return b;
}

TEST(CpuAddSoftmax, BitIdenticalToTheStepsAndCloseToTheReference) {
  const Case cases[] = {
      {"bert", {4, 128, 128}, {4, 1, 128}, true, true, false, false, -1, 17, true},
      {"awkward", {2, 3, 5, 37}, {2, 1, 1, 37}, true, true, false, true, -1, 17, true},
      {"mask first", {3, 7, 19}, {3, 1, 19}, true, true, true, false, 2, 17, true},
      {"x scaled only", {6, 33}, {33}, true, false, false, false, 1, 17, true},
      {"mask scaled only", {6, 33}, {6, 1}, false, true, true, false, -1, 17, true},
      {"plain add", {5, 4, 9}, {5, 4, 9}, false, false, false, false, -1, 17, true},
      {"one mask value", {5, 4, 9}, {1}, true, true, false, false, -1, 17, true},
      {"full second", {1, 9}, {4, 3, 9}, true, true, false, false, -1, 17, true},
      {"legacy last axis", {6, 40}, {40}, true, true, false, false, 1, 11, true},
      {"inner axis", {4, 6, 5}, {4, 6, 1}, true, true, false, false, 1, 17, false},
      {"legacy coerced", {2, 6, 5}, {6, 5}, true, true, false, false, 1, 11, false},
      {"both broadcast", {4, 1, 9}, {1, 5, 9}, true, true, false, false, -1, 17, false},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    GraphBuilder b = Build(c, seed += 7);
    auto report = ExpectMatchesReference(b, 1e-4, 1e-6);
    bool pattern = false;
    for (const auto& r : report) pattern = pattern || r.provider == "cpu (AddSoftmax)";
    EXPECT_EQ(pattern, c.fused);
    // The unfused cpu steps (an observer turns patterns off): the same bits.
    ExpectPatternBitIdentical(b);
  }
}

}  // namespace
}  // namespace ferry::cpu_test

// Shared by the cpu provider's gtests: seeded random tensors, a small graph builder and the
// check that runs a graph on the cpu provider (twice: the second run reuses packed state) and
// on the reference provider and compares every output within a tolerance.
#pragma once

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "ir/graph.h"
#include "runtime/session.h"

namespace ferry::cpu_test {

using runtime::Session;
using runtime::SessionOptions;

inline Tensor Rand(const Shape& shape, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  Tensor t(DType::kFloat, shape);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  for (auto& x : t.span<float>()) x = d(gen);
  return t;
}

// A small graph builder: nodes in order, initializers, inputs fed at run time.
class GraphBuilder {
 public:
  GraphBuilder() {
    m_ = std::make_shared<ir::Model>();
    m_->ir_version = 8;
    m_->opset_imports.push_back({"", 17});
  }
  GraphBuilder& Opset(int64_t v) {
    m_->opset_imports[0].version = v;
    return *this;
  }
  GraphBuilder& Input(const std::string& name, Tensor t) {
    m_->graph.inputs.push_back({name, {}, ""});
    feeds_.emplace_back(name, Value(std::move(t)));
    return *this;
  }
  GraphBuilder& Const(const std::string& name, Tensor t) {
    m_->graph.initializers.push_back({name, std::move(t), ""});
    return *this;
  }
  ir::Node& Node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
    ir::Node n;
    n.op_type = op;
    n.name = op + "_" + std::to_string(m_->graph.nodes.size());
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    m_->graph.nodes.push_back(std::move(n));
    return m_->graph.nodes.back();
  }
  GraphBuilder& Output(const std::string& name) {
    m_->graph.outputs.push_back({name, {}, ""});
    return *this;
  }
  std::shared_ptr<const ir::Model> model() const { return m_; }
  std::vector<std::pair<std::string, Value>>& feeds() { return feeds_; }

 private:
  std::shared_ptr<ir::Model> m_;
  std::vector<std::pair<std::string, Value>> feeds_;
};

inline void SetInts(ir::Node& n, const std::string& name, std::vector<int64_t> v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInts;
  a.ints = std::move(v);
  n.attributes.push_back(std::move(a));
}
inline void SetFloat(ir::Node& n, const std::string& name, float v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kFloat;
  a.f = v;
  n.attributes.push_back(std::move(a));
}
inline void SetInt(ir::Node& n, const std::string& name, int64_t v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInt;
  a.i = v;
  n.attributes.push_back(std::move(a));
}
inline void SetString(ir::Node& n, const std::string& name, const std::string& v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kString;
  a.s = v;
  n.attributes.push_back(std::move(a));
}

// A scalar tensor of type float, uint8 or int8 (quantization parameters in QDQ test graphs).
// A 1-D int64 tensor (shapes, starts / ends / axes).
inline Tensor Int64s(const std::vector<int64_t>& v) {
  Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

inline Tensor QScalar(DType t, double v) {
  Tensor s(t, Shape{});
  if (t == DType::kFloat)
    s.data<float>()[0] = static_cast<float>(v);
  else if (t == DType::kUint8)
    s.data<uint8_t>()[0] = static_cast<uint8_t>(v);
  else
    s.data<int8_t>()[0] = static_cast<int8_t>(v);
  return s;
}

// Seeded uniform integers in [lo, hi], stored as T.
template <typename T>
Tensor RandInts(DType dt, const Shape& shape, int lo, int hi, uint32_t seed) {
  Tensor t(dt, shape);
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  for (auto& x : t.span<T>()) x = static_cast<T>(d(gen));
  return t;
}

// Runs the model with both providers (twice with cpu: the second run reuses packed state) and
// checks every output within rtol/atol. Returns the cpu session's node report.
// The activations the conv kernel tests put after a value `y` (the runtime fuses them into the
// conv that writes `y`); returns the name of the result. Clip is [-0.25, 0.5]. `tag` keeps the
// added names unique.
// kHardSwishGate: v * HardSigmoid(v) (alpha 1/6, beta 0.5), torch's export of nn.Hardswish.
// Constant BatchNormalization statistics of c channels, named p + "s", "bb", "m", "v" (scale in
// [0.5, 1.5), variance in [0.1, 2)), seeds taken from *seed in that order; returns the names in
// the node's input order.
inline std::vector<std::string> AddBnStats(GraphBuilder& b, const std::string& p, int64_t c,
                                           uint32_t* seed) {
  b.Const(p + "s", Rand({c}, (*seed)++, 0.5f, 1.5f));
  b.Const(p + "bb", Rand({c}, (*seed)++));
  b.Const(p + "m", Rand({c}, (*seed)++));
  b.Const(p + "v", Rand({c}, (*seed)++, 0.1f, 2.f));
  return {p + "s", p + "bb", p + "m", p + "v"};
}

enum class PostOp { kNone, kRelu, kClip, kSilu, kHardSwish, kHardSwishGate };
inline std::string AddPostOp(GraphBuilder& b, const std::string& y, PostOp op,
                             const std::string& tag = "post") {
  const std::string out = tag + "_out";
  switch (op) {
    case PostOp::kNone:
      return y;
    case PostOp::kRelu:
    case PostOp::kHardSwish:
      b.Node(op == PostOp::kRelu ? "Relu" : "HardSwish", {y}, {out});
      return out;
    case PostOp::kClip:
      b.Const(tag + "_lo", Tensor::FromVector<float>({-0.25f}, {}));
      b.Const(tag + "_hi", Tensor::FromVector<float>({0.5f}, {}));
      b.Node("Clip", {y, tag + "_lo", tag + "_hi"}, {out});
      return out;
    case PostOp::kSilu:
      b.Node("Sigmoid", {y}, {tag + "_gate"});
      b.Node("Mul", {y, tag + "_gate"}, {out});
      return out;
    case PostOp::kHardSwishGate: {
      ir::Node& h = b.Node("HardSigmoid", {y}, {tag + "_gate"});
      SetFloat(h, "alpha", 1.f / 6.f);
      SetFloat(h, "beta", 0.5f);
      b.Node("Mul", {tag + "_gate", y}, {out});
      return out;
    }
  }
  return y;
}

// The provider a session's node report gives the node named `name` ("" when none has it).
inline std::string ProviderOfNode(const std::vector<runtime::NodeReport>& report,
                                  const std::string& name) {
  for (const auto& r : report)
    if (r.name == name) return r.provider;
  return "";
}

// The provider of the first node of type `op` in a node report ("" when there is none).
inline std::string ProviderOfOp(const std::vector<runtime::NodeReport>& report,
                                const std::string& op) {
  for (const auto& r : report)
    if (r.op_type == op) return r.provider;
  return "";
}

inline std::vector<runtime::NodeReport> ExpectMatchesReference(GraphBuilder& b, double rtol = 1e-4,
                                                               double atol = 1e-5,
                                                               int threads = 2) {
  SessionOptions ref_opts;
  ref_opts.provider = "reference";
  ref_opts.threads = threads;
  auto ref = Session::Create(b.model(), ref_opts);
  EXPECT_TRUE(ref.ok()) << ref.status().message();
  if (!ref.ok()) return {};
  auto want = (*ref)->Run(b.feeds());
  EXPECT_TRUE(want.ok()) << want.status().message();
  SessionOptions cpu_opts;
  cpu_opts.threads = threads;
  auto cpu = Session::Create(b.model(), cpu_opts);
  EXPECT_TRUE(cpu.ok()) << cpu.status().message();
  if (!want.ok() || !cpu.ok()) return {};
  for (int round = 0; round < 2; ++round) {
    auto got = (*cpu)->Run(b.feeds());
    EXPECT_TRUE(got.ok()) << got.status().message();
    if (!got.ok()) return {};
    EXPECT_EQ(got->size(), want->size());
    for (size_t k = 0; k < got->size() && k < want->size(); ++k) {
      const Tensor& g = (*got)[k].tensor();
      const Tensor& w = (*want)[k].tensor();
      EXPECT_EQ(g.shape(), w.shape()) << "output " << k;
      if (g.shape() != w.shape()) continue;
      int64_t bad = 0;
      double worst = 0;
      for (int64_t i = 0; i < g.size(); ++i) {
        const double gv = g.GetAsDouble(i), wv = w.GetAsDouble(i);
        if (gv == wv || (std::isnan(gv) && std::isnan(wv))) continue;  // also infinities
        double d = std::fabs(gv - wv);
        worst = std::max(worst, d);
        if (!(d <= atol + rtol * std::fabs(w.GetAsDouble(i)))) ++bad;
      }
      EXPECT_EQ(bad, 0) << "output " << k << " round " << round << ": " << bad << " of " << g.size()
                        << " elements out of tolerance, max abs diff " << worst;
    }
  }
  return (*cpu)->node_report();
}

// Output 0 of the model with the cpu provider's patterns (a plain run) and without them (an
// observer turns patterns off: every step on its own kernel) is the same bits (NaN = NaN).
inline void ExpectPatternBitIdentical(GraphBuilder& b) {
  auto s = Session::Create(b.model(), {});
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto fused = (*s)->Run(b.feeds());
  runtime::RunOptions ro;
  ro.observer = [](const ir::Node&, const std::string&, const Value&) {};
  auto steps = (*s)->Run(b.feeds(), ro);
  ASSERT_TRUE(fused.ok() && steps.ok());
  const Tensor& f = (*fused)[0].tensor();
  const Tensor& u = (*steps)[0].tensor();
  ASSERT_EQ(f.shape(), u.shape());
  for (int64_t i = 0; i < f.size(); ++i) {
    const float a = f.data<float>()[i], e = u.data<float>()[i];
    ASSERT_TRUE(a == e || (a != a && e != e)) << "element " << i << ": " << a << " vs " << e;
  }
}

// Runs the model once on the cpu provider with `threads` threads: its outputs (none after a
// failure, which is reported) and, with `report`, the session's node report.
inline std::vector<Value> RunOnCpu(GraphBuilder& b, int threads,
                                   std::vector<runtime::NodeReport>* report = nullptr) {
  SessionOptions o;
  o.threads = threads;
  auto s = Session::Create(b.model(), o);
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return {};
  auto out = (*s)->Run(b.feeds());
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok()) return {};
  if (report) *report = (*s)->node_report();
  return std::move(out).value();
}

// Runs the model on the cpu provider at 1 and at 2 threads and checks that every output has the
// same bits (results must not depend on the thread count).
inline void ExpectSameBitsAtOneAndTwoThreads(GraphBuilder& b) {
  std::vector<std::vector<Value>> outs;
  for (int threads : {1, 2}) outs.push_back(RunOnCpu(b, threads));
  ASSERT_FALSE(outs[0].empty());
  ASSERT_EQ(outs[0].size(), outs[1].size());
  for (size_t k = 0; k < outs[0].size(); ++k) {
    const Tensor& a = outs[0][k].tensor();
    const Tensor& c = outs[1][k].tensor();
    ASSERT_EQ(a.shape(), c.shape()) << "output " << k;
    EXPECT_EQ(0, std::memcmp(a.raw(), c.raw(), a.nbytes())) << "output " << k;
  }
}

}  // namespace ferry::cpu_test

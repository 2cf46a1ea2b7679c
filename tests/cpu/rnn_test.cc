// The cpu GRU and LSTM kernels (ops/cpu/rnn.cc) against the reference kernels: seeded awkward
// shapes (batch 1/3, sequence 1/13, hidden 1/3/13/127, odd input sizes), every direction,
// layout 0 and 1, with and without B / initial_h / initial_c / P / sequence_lens, optional
// outputs, linear_before_reset 0/1, clip, input_forget, computed (non-initializer) weights, one
// and two threads, repeated runs; on each of the kernel's paths (AVX-512, AVX2, scalar).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "graph_builders.h"
#include "ir/graph.h"
#include "ops/cpu/families.h"
#include "runtime/session.h"

namespace ferry {
namespace {

using runtime::Session;
using runtime::SessionOptions;
using testing::MakeNode;

Tensor Rand(const Shape& shape, std::mt19937& gen, float lo = -1.f, float hi = 1.f) {
  Tensor t(DType::kFloat, shape);
  std::uniform_real_distribution<float> d(lo, hi);
  for (auto& x : t.span<float>()) x = d(gen);
  return t;
}

struct RnnCase {
  bool lstm = false;
  int64_t T = 1, B = 1, I = 1, H = 1;
  std::string direction = "forward";
  bool layout1 = false;
  bool bias = true, init_h = false, init_c = false, peep = false, seq_lens = false;
  bool lbr = false, input_forget = false, clip = false;
  bool const_weights = true;
  bool y = true, y_h = true, y_c = true;
  std::string activations;  // non-empty: a non-default first activation (declined)

  std::string Describe() const {
    return (lstm ? std::string("LSTM") : std::string("GRU")) + " T=" + std::to_string(T) +
           " B=" + std::to_string(B) + " I=" + std::to_string(I) + " H=" + std::to_string(H) + " " +
           direction + " layout=" + std::to_string(layout1) + " bias=" + std::to_string(bias) +
           " init_h=" + std::to_string(init_h) + " init_c=" + std::to_string(init_c) +
           " peep=" + std::to_string(peep) + " seq_lens=" + std::to_string(seq_lens) +
           " lbr=" + std::to_string(lbr) + " input_forget=" + std::to_string(input_forget) +
           " clip=" + std::to_string(clip) + " const=" + std::to_string(const_weights) +
           " outs=" + std::to_string(y) + std::to_string(y_h) + std::to_string(y_c);
  }
};

struct Built {
  std::shared_ptr<ir::Model> model;
  std::vector<std::pair<std::string, Value>> feeds;
};

Built Build(const RnnCase& c, uint32_t seed) {
  std::mt19937 gen(seed);
  auto m = std::make_shared<ir::Model>();
  m->ir_version = 8;
  m->opset_imports.push_back({"", 17});
  ir::Graph& g = m->graph;
  Built out;
  const int64_t nd = c.direction == "bidirectional" ? 2 : 1;
  const int64_t G = c.lstm ? 4 : 3;
  auto input = [&](const std::string& name, Tensor t) {
    g.inputs.push_back({name, {}, ""});
    out.feeds.emplace_back(name, Value(std::move(t)));
  };
  auto weight = [&](const std::string& name, Tensor t) {
    if (c.const_weights)
      g.initializers.push_back({name, std::move(t), ""});
    else
      input(name, std::move(t));
  };
  // Weights on PyTorch's initial scale, U(-1/sqrt(H), 1/sqrt(H)): larger ones make a chaotic
  // recurrence in which float32 and the double reference part ways for any summation order.
  const float ws = 1.f / std::sqrt(static_cast<float>(c.H));
  input("x", Rand(c.layout1 ? Shape{c.B, c.T, c.I} : Shape{c.T, c.B, c.I}, gen));
  weight("w", Rand({nd, G * c.H, c.I}, gen, -ws, ws));
  weight("r", Rand({nd, G * c.H, c.H}, gen, -ws, ws));
  std::vector<std::string> in = {"x", "w", "r", "", "", ""};
  if (c.bias) {
    weight("b", Rand({nd, 2 * G * c.H}, gen, -ws, ws));
    in[3] = "b";
  }
  if (c.seq_lens) {
    std::vector<int32_t> lens;
    std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(c.T));
    for (int64_t b = 0; b < c.B; ++b) lens.push_back(b == 0 ? static_cast<int32_t>(c.T) : d(gen));
    input("lens", Tensor::FromVector<int32_t>(lens, {c.B}));
    in[4] = "lens";
  }
  const Shape state = c.layout1 ? Shape{c.B, nd, c.H} : Shape{nd, c.B, c.H};
  if (c.init_h) {
    input("h0", Rand(state, gen));
    in[5] = "h0";
  }
  if (c.lstm) {
    in.resize(8);
    if (c.init_c) {
      input("c0", Rand(state, gen));
      in[6] = "c0";
    }
    if (c.peep) {
      weight("p", Rand({nd, 3 * c.H}, gen, -ws, ws));
      in[7] = "p";
    }
  }
  while (!in.empty() && in.back().empty()) in.pop_back();
  std::vector<std::string> outs = {c.y ? "y" : "", c.y_h ? "y_h" : ""};
  if (c.lstm) outs.push_back(c.y_c ? "y_c" : "");
  while (!outs.empty() && outs.back().empty()) outs.pop_back();
  ir::Node n = MakeNode(c.lstm ? "LSTM" : "GRU", in, outs);
  n.name = "rnn";
  auto attr_int = [&](const std::string& name, int64_t v) {
    ir::Attribute a;
    a.name = name;
    a.type = ir::AttrType::kInt;
    a.i = v;
    n.attributes.push_back(std::move(a));
  };
  attr_int("hidden_size", c.H);
  if (c.layout1) attr_int("layout", 1);
  if (c.lbr) attr_int("linear_before_reset", 1);
  if (c.input_forget) attr_int("input_forget", 1);
  ir::Attribute dir;
  dir.name = "direction";
  dir.type = ir::AttrType::kString;
  dir.s = c.direction;
  n.attributes.push_back(std::move(dir));
  if (c.clip) {
    ir::Attribute a;
    a.name = "clip";
    a.type = ir::AttrType::kFloat;
    a.f = 0.75f;
    n.attributes.push_back(std::move(a));
  }
  if (!c.activations.empty()) {
    ir::Attribute a;
    a.name = "activations";
    a.type = ir::AttrType::kStrings;
    a.strings = {c.activations, "Tanh"};
    if (c.lstm) a.strings.push_back("Tanh");
    n.attributes.push_back(std::move(a));
  }
  g.nodes.push_back(std::move(n));
  for (const std::string& o : outs)
    if (!o.empty()) g.outputs.push_back({o, {}, ""});
  out.model = std::move(m);
  return out;
}

// Runs the case with the reference provider and with the cpu provider (twice: the second run
// reuses the packed weights) and compares every output. Returns the cpu node's provider.
std::string ExpectMatches(const RnnCase& c, uint32_t seed, int threads, double tol = 1e-5) {
  SCOPED_TRACE(c.Describe() + " threads=" + std::to_string(threads));
  Built b = Build(c, seed);
  SessionOptions ro;
  ro.provider = "reference";
  ro.threads = threads;
  auto ref = Session::Create(b.model, ro);
  EXPECT_TRUE(ref.ok()) << ref.status().message();
  if (!ref.ok()) return "";
  auto want = (*ref)->Run(b.feeds);
  EXPECT_TRUE(want.ok()) << want.status().message();
  SessionOptions co;
  co.threads = threads;
  auto cpu = Session::Create(b.model, co);
  EXPECT_TRUE(cpu.ok()) << cpu.status().message();
  if (!want.ok() || !cpu.ok()) return "";
  for (int round = 0; round < 2; ++round) {
    auto got = (*cpu)->Run(b.feeds);
    EXPECT_TRUE(got.ok()) << got.status().message();
    if (!got.ok()) return "";
    EXPECT_EQ(got->size(), want->size());
    for (size_t k = 0; k < got->size() && k < want->size(); ++k) {
      const Tensor& gt = (*got)[k].tensor();
      const Tensor& wt = (*want)[k].tensor();
      EXPECT_EQ(gt.shape(), wt.shape()) << "output " << k;
      if (gt.shape() != wt.shape()) continue;
      int64_t bad = 0;
      double worst = 0;
      for (int64_t i = 0; i < gt.size(); ++i) {
        const double d = std::fabs(gt.GetAsDouble(i) - wt.GetAsDouble(i));
        worst = std::max(worst, d);
        if (!(d <= tol + tol * std::fabs(wt.GetAsDouble(i)))) ++bad;
      }
      EXPECT_EQ(bad, 0) << "output " << k << " round " << round << ": " << bad << " of "
                        << gt.size() << " out of tolerance, max abs diff " << worst;
    }
  }
  for (const auto& r : (*cpu)->node_report())
    if (r.name == "rnn") return r.provider;
  return "";
}

// Seeded combinations of the options over the awkward shapes.
std::vector<RnnCase> Cases(bool lstm) {
  struct Dims {
    int64_t T, B, I, H;
  };
  const Dims dims[] = {{1, 1, 1, 1},    {13, 3, 5, 13}, {13, 1, 7, 3}, {1, 3, 3, 127},
                       {13, 3, 9, 127}, {4, 2, 17, 16}, {7, 3, 1, 8},  {13, 1, 11, 1}};
  const char* dirs[] = {"forward", "reverse", "bidirectional"};
  std::mt19937 gen(lstm ? 77 : 55);
  std::bernoulli_distribution coin(0.5);
  std::vector<RnnCase> cases;
  for (const Dims& d : dims)
    for (const char* dir : dirs)
      for (int variant = 0; variant < 2; ++variant) {
        RnnCase c;
        c.lstm = lstm;
        c.T = d.T;
        c.B = d.B;
        c.I = d.I;
        c.H = d.H;
        c.direction = dir;
        c.layout1 = coin(gen);
        c.bias = coin(gen);
        c.init_h = coin(gen);
        c.init_c = coin(gen);
        c.peep = coin(gen);
        c.seq_lens = coin(gen);
        c.lbr = variant == 1;  // GRU: both forms for every shape
        c.input_forget = lstm && coin(gen) && coin(gen);
        c.clip = coin(gen) && coin(gen);
        c.const_weights = coin(gen) || coin(gen);
        c.y = coin(gen) || coin(gen);
        c.y_h = !c.y || coin(gen);
        c.y_c = coin(gen);
        cases.push_back(c);
      }
  return cases;
}

TEST(CpuRnn, GruMatchesReference) {
  uint32_t seed = 1000;
  for (const RnnCase& c : Cases(false))
    for (int threads : {1, 2}) EXPECT_EQ(ExpectMatches(c, seed++, threads), "cpu");
}

TEST(CpuRnn, LstmMatchesReference) {
  uint32_t seed = 2000;
  for (const RnnCase& c : Cases(true))
    for (int threads : {1, 2}) EXPECT_EQ(ExpectMatches(c, seed++, threads), "cpu");
}

// Every option on at once, both directions, both layouts, the zoo model's shape (hidden 64).
TEST(CpuRnn, AllOptionsAndZooShape) {
  uint32_t seed = 3000;
  for (bool lstm : {false, true})
    for (bool layout1 : {false, true})
      for (const char* dir : {"forward", "reverse", "bidirectional"}) {
        RnnCase c;
        c.lstm = lstm;
        c.T = 13;
        c.B = 3;
        c.I = 7;
        c.H = 13;
        c.direction = dir;
        c.layout1 = layout1;
        c.init_h = c.init_c = c.peep = c.seq_lens = c.lbr = c.clip = true;
        EXPECT_EQ(ExpectMatches(c, seed++, 2), "cpu");
        RnnCase z;  // the zoo GRU encoder: batch 8, sequence 32, input 64, hidden 64
        z.lstm = lstm;
        z.T = 32;
        z.B = 8;
        z.I = 64;
        z.H = 64;
        z.direction = dir;
        z.layout1 = layout1;
        z.init_h = true;
        z.lbr = true;
        EXPECT_EQ(ExpectMatches(z, seed++, 1), "cpu");
      }
}

// Work above the kernel's threshold for threads: the input projection split over rows
// (forward, reverse) and the two directions on two threads (bidirectional); same numbers as one
// thread's run within tolerance, and as the reference.
TEST(CpuRnn, ParallelPathsMatchReference) {
  uint32_t seed = 3500;
  for (bool lstm : {false, true})
    for (const char* dir : {"forward", "bidirectional"}) {
      RnnCase c;
      c.lstm = lstm;
      c.T = 32;
      c.B = 16;
      c.I = 193;
      c.H = 67;
      c.direction = dir;
      c.init_h = c.seq_lens = c.lbr = c.peep = true;
      EXPECT_EQ(ExpectMatches(c, seed, 2), "cpu");
      EXPECT_EQ(ExpectMatches(c, seed++, 1), "cpu");
    }
}

// Selects the kernel's path for its lifetime: 0 the default (AVX-512 where the CPU has it), 1 at
// most AVX2, 2 scalar.
struct PathGuard {
  explicit PathGuard(int path) {
    ops::cpu::SetRnnNoAvx512ForTesting(path >= 1);
    ops::cpu::SetRnnScalarOnlyForTesting(path == 2);
    EXPECT_EQ(ops::cpu::RnnPathForTesting(), std::min(path == 0 ? 2 : path == 1 ? 1 : 0, Best()));
  }
  // What this CPU offers (the kernel's own check, x86 only).
  static int Best() {
#if defined(__x86_64__) || defined(__i386__)
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return 0;
    return __builtin_cpu_supports("avx512f") ? 2 : 1;
#else
    return 0;
#endif
  }
  ~PathGuard() {
    ops::cpu::SetRnnNoAvx512ForTesting(false);
    ops::cpu::SetRnnScalarOnlyForTesting(false);
  }
};

// Every `step`-th GRU and LSTM case on the forced path (PathGuard) against the reference.
void PathMatchesReference(int path, uint32_t seed, size_t step) {
  PathGuard guard(path);
  for (bool lstm : {false, true}) {
    std::vector<RnnCase> cases = Cases(lstm);
    for (size_t i = 0; i < cases.size(); i += step)
      EXPECT_EQ(ExpectMatches(cases[i], seed++, 1), "cpu");
  }
}

// The portable scalar loops (used where the CPU lacks AVX2+FMA) against the reference.
TEST(CpuRnn, ScalarLoopsMatchReference) {
  PathMatchesReference(2, 3800, 3);
}

// The AVX2 loops (used where the CPU has AVX2+FMA but not AVX-512F; the default path on such a
// machine) against the reference. Where AVX-512 is absent this repeats the default path.
TEST(CpuRnn, Avx2LoopsMatchReference) {
  PathMatchesReference(1, 3900, 2);
}

// Shapes around the AVX-512 path's blocking (16 hidden units a panel, row tiles of at most 8 or
// 6): hidden 1, 15, 16, 17, 33, 64, batch 1 to 13 (tiles 7 + 6), every direction, both GRU forms,
// LSTM with peepholes (and input_forget), sequence lengths, clip, and the same cases on the AVX2
// and scalar loops.
TEST(CpuRnn, PanelAndRowTileEdges) {
  struct Dims {
    int64_t T, B, I, H;
  };
  const Dims dims[] = {{5, 9, 3, 1},  {6, 13, 5, 15}, {4, 8, 16, 16},
                       {7, 7, 9, 17}, {3, 12, 2, 33}, {5, 1, 64, 64}};
  uint32_t seed = 4100;
  for (int path = 0; path < 3; ++path) {  // default (AVX-512 where present), AVX2, scalar
    PathGuard guard(path);
    for (const Dims& d : dims)
      for (const char* dir : {"forward", "reverse", "bidirectional"})
        for (int variant = 0; variant < 3; ++variant) {  // GRU lbr 0, GRU lbr 1, LSTM
          RnnCase c;
          c.lstm = variant == 2;
          c.lbr = variant == 1;
          c.T = d.T;
          c.B = d.B;
          c.I = d.I;
          c.H = d.H;
          c.direction = dir;
          c.layout1 = (seed & 1) != 0;
          c.init_h = c.init_c = c.peep = true;
          c.seq_lens = (seed & 2) != 0;
          c.clip = (seed % 5) == 0;
          c.input_forget = c.lstm && (seed & 4) != 0;
          EXPECT_EQ(ExpectMatches(c, seed++, 1), "cpu") << "path " << path;
        }
  }
}

// One thread and two give identical bits (the row split of the projection and the two
// directions on two threads compute every element with the same code), on every path.
TEST(CpuRnn, ThreadCountDoesNotChangeTheBits) {
  for (int path = 0; path < 2; ++path) {
    PathGuard guard(path);
    for (bool lstm : {false, true})
      for (const char* dir : {"forward", "bidirectional"}) {
        RnnCase c;
        c.lstm = lstm;
        c.T = 32;
        c.B = 16;
        c.I = 193;
        c.H = 67;
        c.direction = dir;
        c.init_h = c.seq_lens = c.lbr = c.peep = true;
        SCOPED_TRACE(c.Describe() + " path " + std::to_string(path));
        Built b = Build(c, 4500);
        std::vector<Value> outs[2];
        for (int threads : {1, 2}) {
          auto s = Session::Create(b.model, {.threads = threads});
          ASSERT_TRUE(s.ok());
          auto got = (*s)->Run(b.feeds);
          ASSERT_TRUE(got.ok());
          outs[threads - 1] = std::move(*got);
        }
        ASSERT_EQ(outs[0].size(), outs[1].size());
        for (size_t k = 0; k < outs[0].size(); ++k) {
          const Tensor& a = outs[0][k].tensor();
          const Tensor& t = outs[1][k].tensor();
          ASSERT_EQ(a.shape(), t.shape());
          EXPECT_EQ(std::memcmp(a.raw(), t.raw(), static_cast<size_t>(a.size()) * sizeof(float)), 0)
              << "output " << k;
        }
      }
  }
}

// sequence_lens is checked on every run (the packed state is kept across runs): a value past
// the sequence on a later run is the reference's error, not an out-of-bounds read.
TEST(CpuRnn, BadSequenceLengthOnALaterRunIsAnError) {
  for (bool lstm : {false, true}) {
    RnnCase c;
    c.lstm = lstm;
    c.T = 5;
    c.B = 3;
    c.I = 4;
    c.H = 8;
    c.seq_lens = true;
    Built b = Build(c, 5100);
    auto s = Session::Create(b.model, {.threads = 1});
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->Run(b.feeds).ok());
    for (auto& [name, v] : b.feeds)
      if (name == "lens") v = Value(Tensor::FromVector<int32_t>({5, 6, 1}, {3}));
    auto r = (*s)->Run(b.feeds);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("sequence_lens value 6"), std::string::npos)
        << r.status().message();
    for (auto& [name, v] : b.feeds)
      if (name == "lens") v = Value(Tensor::FromVector<int32_t>({5, -1, 1}, {3}));
    EXPECT_FALSE((*s)->Run(b.feeds).ok());
  }
}

// Non-default activations stay on the reference kernel; so does a non-float node.
TEST(CpuRnn, NonDefaultActivationsRunTheReference) {
  for (bool lstm : {false, true}) {
    RnnCase c;
    c.lstm = lstm;
    c.T = 3;
    c.B = 2;
    c.I = 3;
    c.H = 5;
    c.activations = "HardSigmoid";
    EXPECT_EQ(ExpectMatches(c, 4000, 1), "reference");
    c.activations = "sigmoid";  // the default, spelt differently: still the cpu kernel
    EXPECT_EQ(ExpectMatches(c, 4001, 1), "cpu");
  }
}

// Repeated runs with new weights (computed W) and new sequence lengths give fresh results.
TEST(CpuRnn, RepacksComputedWeightsEveryRun) {
  RnnCase c;
  c.T = 5;
  c.B = 3;
  c.I = 4;
  c.H = 13;
  c.const_weights = false;
  c.seq_lens = true;
  Built b = Build(c, 5000);
  SessionOptions co;
  co.threads = 1;
  auto cpu = Session::Create(b.model, co);
  ASSERT_TRUE(cpu.ok());
  SessionOptions ro = co;
  ro.provider = "reference";
  auto ref = Session::Create(b.model, ro);
  ASSERT_TRUE(ref.ok());
  std::mt19937 gen(5001);
  for (int round = 0; round < 3; ++round) {
    for (auto& [name, v] : b.feeds)
      if (name == "w" || name == "r" || name == "b") v = Value(Rand(v.tensor().shape(), gen));
    auto got = (*cpu)->Run(b.feeds);
    auto want = (*ref)->Run(b.feeds);
    ASSERT_TRUE(got.ok() && want.ok());
    for (size_t k = 0; k < got->size(); ++k)
      for (int64_t i = 0; i < (*got)[k].tensor().size(); ++i)
        EXPECT_NEAR((*got)[k].tensor().GetAsDouble(i), (*want)[k].tensor().GetAsDouble(i), 1e-5)
            << "round " << round << " output " << k << " element " << i;
  }
}

}  // namespace
}  // namespace ferry

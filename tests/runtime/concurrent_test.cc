// Concurrent runs on one Session: bit-identical to serial runs, weights packed once, run
// contexts per run in flight, bad inputs failing only their own run, the core budget.
#include <algorithm>
#include <barrier>
#include <cstring>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"
#include "runtime/context.h"
#include "runtime/session.h"

namespace ferry::runtime {
namespace {

using cpu_test::GraphBuilder;
using cpu_test::Int64s;
using cpu_test::Rand;
using cpu_test::SetInts;

// libgomp is not instrumented: ThreadSanitizer does not see its barriers and reports the accesses
// of an OpenMP region's workers as races with the thread that started it. The TSan build (`make
// tsan`) runs one thread per run; the release and ASan builds run the multi-threaded cases too.
#if defined(__SANITIZE_THREAD__)
constexpr bool kOpenMpVisible = false;
#else
constexpr bool kOpenMpVisible = true;
#endif

// x [N,8,H,W] -> Conv3x3 -> Relu -> Conv3x3 (+ residual) -> Relu -> GlobalAveragePool ->
// Flatten -> Gemm [8 -> 5] -> y; and x -> ReduceMean -> z (a second output).
GraphBuilder ConvNet() {
  GraphBuilder b;
  b.Input("x", Rand({1, 8, 9, 9}, 1));
  b.Const("w1", Rand({8, 8, 3, 3}, 2, -0.3f, 0.3f));
  b.Const("b1", Rand({8}, 3));
  b.Const("w2", Rand({8, 8, 3, 3}, 4, -0.3f, 0.3f));
  b.Const("fc", Rand({5, 8}, 5));
  b.Const("fcb", Rand({5}, 6));
  SetInts(b.Node("Conv", {"x", "w1", "b1"}, {"c1"}), "pads", {1, 1, 1, 1});
  b.Node("Relu", {"c1"}, {"r1"});
  SetInts(b.Node("Conv", {"r1", "w2"}, {"c2"}), "pads", {1, 1, 1, 1});
  b.Node("Add", {"c2", "x"}, {"s"});
  b.Node("Relu", {"s"}, {"r2"});
  b.Node("GlobalAveragePool", {"r2"}, {"g"});
  b.Node("Flatten", {"g"}, {"f"});
  ir::Node& gemm = b.Node("Gemm", {"f", "fc", "fcb"}, {"y"});
  ir::Attribute tb;
  tb.name = "transB";
  tb.type = ir::AttrType::kInt;
  tb.i = 1;
  gemm.attributes.push_back(std::move(tb));
  SetInts(b.Node("ReduceMean", {"x"}, {"z"}), "axes", {2, 3});
  b.Output("y").Output("z");
  return b;
}

std::vector<Tensor> ConvInputs() {
  return {Rand({1, 8, 9, 9}, 11), Rand({3, 8, 9, 9}, 12), Rand({2, 8, 16, 12}, 13),
          Rand({1, 8, 5, 7}, 14)};
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

std::vector<Tensor> RunOnce(Session& s, const Tensor& x, const RunOptions& ro = {}) {
  auto out = s.Run({{"x", Value(x)}}, ro);
  EXPECT_TRUE(out.ok()) << out.status().message();
  std::vector<Tensor> t;
  if (out.ok())
    for (auto& v : out.value()) t.push_back(v.tensor());
  return t;
}

TEST(Concurrent, RunsMatchSerialBitForBitAtMixedShapes) {
  for (int threads : {1, 2}) {
    if (threads > 1 && !kOpenMpVisible) continue;
    GraphBuilder b = ConvNet();
    SessionOptions so;
    so.threads = threads;
    so.share_cores = false;  // every run gets `threads`: the serial runs' thread count
    auto s = Session::Create(b.model(), so);
    ASSERT_TRUE(s.ok()) << s.status().message();
    const std::vector<Tensor> xs = ConvInputs();
    std::vector<std::vector<Tensor>> want;
    for (const Tensor& x : xs) want.push_back(RunOnce(**s, x));
    constexpr int kCallers = 8, kRuns = 12;
    std::vector<int> bad(kCallers, 0);
    std::vector<std::thread> callers;
    for (int c = 0; c < kCallers; ++c)
      callers.emplace_back([&, c] {
        std::mt19937 gen(static_cast<uint32_t>(c));
        for (int r = 0; r < kRuns; ++r) {
          const size_t k = gen() % xs.size();
          auto out = (*s)->Run({{"x", Value(xs[k])}});
          if (!out.ok() || out.value().size() != want[k].size()) {
            ++bad[static_cast<size_t>(c)];
            continue;
          }
          for (size_t o = 0; o < want[k].size(); ++o)
            if (!SameBits(out.value()[o].tensor(), want[k][o])) ++bad[static_cast<size_t>(c)];
        }
      });
    for (auto& t : callers) t.join();
    for (int c = 0; c < kCallers; ++c) EXPECT_EQ(bad[static_cast<size_t>(c)], 0) << "caller " << c;
  }
}

// Two runs held in flight together (each waits in the observer for the other) take two run
// contexts; their results are those of serial runs, and the weights stay packed once.
TEST(Concurrent, RunsInFlightTogetherUseTheirOwnContexts) {
  GraphBuilder b = ConvNet();
  SessionOptions so;
  so.threads = 1;
  auto s = Session::Create(b.model(), so);
  ASSERT_TRUE(s.ok());
  const std::vector<Tensor> xs = ConvInputs();
  const auto want0 = RunOnce(**s, xs[0]), want1 = RunOnce(**s, xs[1]);
  const size_t weights = (*s)->weights_bytes();
  EXPECT_EQ((*s)->contexts(), 1u);
  std::barrier meet(2);
  RunOptions ro;
  ro.observer = [&](const ir::Node& n, const std::string&, const Value&) {
    if (n.op_type == "Relu" && n.outputs[0] == "r1") meet.arrive_and_wait();
  };
  std::vector<Tensor> got0, got1;
  std::thread a([&] { got0 = RunOnce(**s, xs[0], ro); });
  std::thread c([&] { got1 = RunOnce(**s, xs[1], ro); });
  a.join();
  c.join();
  EXPECT_EQ((*s)->contexts(), 2u);
  ASSERT_EQ(got0.size(), want0.size());
  ASSERT_EQ(got1.size(), want1.size());
  // Observed runs are unfused: equal within rounding, not bit for bit, to the fused ones.
  for (size_t o = 0; o < want0.size(); ++o)
    for (int64_t i = 0; i < want0[o].size(); ++i) {
      EXPECT_NEAR(got0[o].data<float>()[i], want0[o].data<float>()[i], 1e-4f);
      EXPECT_NEAR(got1[o].data<float>()[i], want1[o].data<float>()[i], 1e-4f);
    }
  // Fused runs in both contexts: bit-identical, weights not packed again.
  std::thread d([&] { got0 = RunOnce(**s, xs[0]); });
  std::thread e([&] { got1 = RunOnce(**s, xs[1]); });
  d.join();
  e.join();
  for (size_t o = 0; o < want0.size(); ++o) {
    EXPECT_TRUE(SameBits(got0[o], want0[o]));
    EXPECT_TRUE(SameBits(got1[o], want1[o]));
  }
  EXPECT_EQ((*s)->weights_bytes(), weights);
}

TEST(Concurrent, PackedWeightsAreSharedByContextsOfEveryThreadCount) {
  if (!kOpenMpVisible)
    GTEST_SKIP() << "two threads per run: OpenMP's workers are invisible to TSan";
  GraphBuilder b = ConvNet();
  SessionOptions so;
  so.threads = 2;
  so.share_cores = false;
  so.profile = true;
  auto s = Session::Create(b.model(), so);
  ASSERT_TRUE(s.ok());
  const Tensor x = ConvInputs()[1];
  const auto want = RunOnce(**s, x);
  const size_t weights = (*s)->weights_bytes();
  size_t initializers = 0;
  for (const auto& init : b.model()->graph.initializers) initializers += init.tensor.nbytes();
  EXPECT_GT(weights, initializers);  // the convs' packed copies
  RunOptions one;
  one.threads = 1;
  const auto got = RunOnce(**s, x, one);  // a second context, one thread
  EXPECT_EQ((*s)->contexts(), 2u);
  EXPECT_EQ((*s)->weights_bytes(), weights);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o)
    for (int64_t i = 0; i < want[o].size(); ++i)
      EXPECT_NEAR(got[o].data<float>()[i], want[o].data<float>()[i], 1e-5f);
  // The profile counts the runs of both contexts; the providers are the last run's.
  for (const NodeReport& r : (*s)->node_report()) {
    EXPECT_EQ(r.calls, r.provider == "fused" ? 0 : 2) << r.name << " " << r.provider;
    EXPECT_FALSE(r.provider.empty());
  }
  (*s)->ResetProfile();
  for (const NodeReport& r : (*s)->node_report()) EXPECT_EQ(r.calls, 0) << r.name;
}

// x [12] reshaped by a shape fed at run time: a bad shape fails that run only.
TEST(Concurrent, BadInputFailsOnlyItsOwnRun) {
  GraphBuilder b;
  b.Input("x", Rand({12}, 1));
  b.Input("shape", Int64s({3, 4}));
  b.Node("Reshape", {"x", "shape"}, {"r"});
  b.Node("Relu", {"r"}, {"y"});
  b.Output("y");
  auto s = Session::Create(b.model(), SessionOptions{.threads = 1});
  ASSERT_TRUE(s.ok());
  const Tensor x = Rand({12}, 7);
  const Tensor good = Int64s({3, 4}), wrong = Int64s({5, 3});
  auto ref = (*s)->Run({{"x", Value(x)}, {"shape", Value(good)}});
  ASSERT_TRUE(ref.ok());
  constexpr int kCallers = 6, kRuns = 20;
  std::vector<int> bad(kCallers, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c)
    callers.emplace_back([&, c] {
      for (int r = 0; r < kRuns; ++r) {
        const bool feed_wrong = (c + r) % 3 == 0;
        auto out = (*s)->Run({{"x", Value(x)}, {"shape", Value(feed_wrong ? wrong : good)}});
        if (feed_wrong) {
          if (out.ok() || out.status().message().find("Reshape") == std::string::npos)
            ++bad[static_cast<size_t>(c)];
        } else if (!out.ok() || !SameBits(out.value()[0].tensor(), ref.value()[0].tensor())) {
          ++bad[static_cast<size_t>(c)];
        }
      }
    });
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) EXPECT_EQ(bad[static_cast<size_t>(c)], 0) << "caller " << c;
  auto again = (*s)->Run({{"x", Value(x)}, {"shape", Value(good)}});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(SameBits(again.value()[0].tensor(), ref.value()[0].tensor()));
}

TEST(CoreBudget, GivesWhatIsFreeAndAtLeastOne) {
  const int cores = ThreadPool::DefaultThreads();
  const int base = CoreBudget::InUse();
  ASSERT_EQ(base, 0);
  const int a = CoreBudget::Acquire(cores);
  EXPECT_EQ(a, cores);
  const int b = CoreBudget::Acquire(2);
  EXPECT_EQ(b, 1);  // nothing free: one thread, no waiting
  CoreBudget::Release(a);
  const int c = CoreBudget::Acquire(cores + 3);
  EXPECT_EQ(c, std::max(1, cores - 1));  // b still holds one
  CoreBudget::Release(b);
  CoreBudget::Release(c);
  EXPECT_EQ(CoreBudget::InUse(), 0);
}

}  // namespace
}  // namespace ferry::runtime

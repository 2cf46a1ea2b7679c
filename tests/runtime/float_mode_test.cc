// Subnormal floats in the cpu provider (SessionOptions::flush_denormals, core/float_mode.h):
// flushed to zero on every thread that computes, by default; kept with the option off and by the
// reference provider; the caller's floating-point mode restored after each run; ThreadPool
// chunks run under the caller's mode.
#include <bit>
#include <cmath>
#include <limits>

#include "core/float_mode.h"
#include "core/thread_pool.h"
#include "cpu/cpu_harness.h"

namespace ferry::cpu_test {
namespace {

constexpr float kSub = std::numeric_limits<float>::denorm_min() * 1000;  // ~1.4e-42

// y = Conv1x1(x, w = 1) * 1: a oneDNN convolution and an elementwise kernel, on an input that
// is all subnormal; 4096 elements per channel so the kernels split over threads.
GraphBuilder SubnormalModel() {
  GraphBuilder b;
  Tensor x(DType::kFloat, {1, 2, 64, 64});
  for (auto& v : x.span<float>()) v = kSub;
  b.Input("x", x);
  b.Const("w", Tensor::FromVector<float>({1, 0, 0, 1}, {2, 2, 1, 1}));
  b.Const("one", Tensor::FromVector<float>({1.f}, {1}));
  b.Node("Conv", {"x", "w"}, {"c"});
  b.Node("Mul", {"x", "one"}, {"m"});
  b.Output("c").Output("m");
  return b;
}

// How many output elements are nonzero (each is kSub or 0); by their bits, since a comparison
// under DAZ would read a subnormal as 0.
int64_t NonZero(const std::vector<Value>& outs) {
  int64_t n = 0;
  for (const auto& v : outs)
    for (float f : v.tensor().span<const float>()) n += (std::bit_cast<uint32_t>(f) << 1) != 0;
  return n;
}

TEST(FloatMode, CpuProviderFlushesSubnormalsAndRestoresTheCallersMode) {
  ASSERT_TRUE(std::fpclassify(kSub) == FP_SUBNORMAL);
  for (int threads : {1, 2}) {
    GraphBuilder b = SubnormalModel();
    const uint32_t before = GetFloatMode();
    SessionOptions o;
    o.threads = threads;
    auto flushed = Session::Create(b.model(), o);
    ASSERT_TRUE(flushed.ok()) << flushed.status().message();
    auto a = (*flushed)->Run(b.feeds());
    ASSERT_TRUE(a.ok()) << a.status().message();
    EXPECT_EQ(GetFloatMode(), before) << "the run changed the caller's floating-point mode";
#ifdef FERRY_HAS_MXCSR
    EXPECT_EQ(NonZero(*a), 0) << threads << " threads: subnormals not flushed";
#endif
    o.flush_denormals = false;
    auto kept = Session::Create(b.model(), o);
    ASSERT_TRUE(kept.ok());
    auto k = (*kept)->Run(b.feeds());
    ASSERT_TRUE(k.ok());
    EXPECT_EQ(NonZero(*k), 2 * 2 * 64 * 64) << threads << " threads, flush_denormals = false";
    o.flush_denormals = true;
    o.provider = "reference";
    auto ref = Session::Create(b.model(), o);
    ASSERT_TRUE(ref.ok());
    auto r = (*ref)->Run(b.feeds());
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(NonZero(*r), 2 * 2 * 64 * 64) << threads << " threads, reference provider";
  }
}

// A caller that flushes itself (the `ferry` binary's main thread does): the flushing session
// flushes, a session with flush_denormals off and the reference provider still keep subnormals
// (on the workers too, which the flushing run left flushing), and the caller's mode is back.
TEST(FloatMode, SessionsThatKeepSubnormalsKeepThemUnderAFlushingCaller) {
#ifndef FERRY_HAS_MXCSR
  GTEST_SKIP() << "no MXCSR on this target";
#else
  const uint32_t saved = GetFloatMode();
  SetFloatMode(saved | kFlushDenormalBits);
  const int64_t all = 2 * 2 * 64 * 64;
  for (int threads : {2, 1, 2}) {
    GraphBuilder b = SubnormalModel();
    SessionOptions o;
    o.threads = threads;
    // Runs `s` `runs` times; each run must leave `want` nonzero outputs and the caller's mode.
    auto check = [&](Session& s, int runs, int64_t want, const char* what) {
      for (int run = 0; run < runs; ++run) {
        auto out = s.Run(b.feeds());
        ASSERT_TRUE(out.ok());
        EXPECT_EQ(NonZero(*out), want) << threads << " threads, " << what << ", run " << run;
        EXPECT_EQ(GetFloatMode(), saved | kFlushDenormalBits) << what;
      }
    };
    auto flushed = Session::Create(b.model(), o);
    ASSERT_TRUE(flushed.ok());
    check(**flushed, 2, 0, "flushing");
    o.flush_denormals = false;
    auto kept = Session::Create(b.model(), o);
    ASSERT_TRUE(kept.ok());
    check(**kept, 2, all, "flush off");
    o.provider = "reference";
    auto ref = Session::Create(b.model(), o);
    ASSERT_TRUE(ref.ok());
    check(**ref, 1, all, "reference provider");
    // And the flushing session again after them: its workers flush again.
    check(**flushed, 1, 0, "flushing after keeping");
  }
  SetFloatMode(saved);
#endif
}

TEST(FloatMode, ThreadPoolChunksRunUnderTheCallersMode) {
  ThreadPool pool(2);
  std::vector<float> out(4096);
  auto run = [&] {
    pool.ParallelFor(static_cast<int64_t>(out.size()), 1, [&](int64_t begin, int64_t end) {
      volatile float x = kSub, one = 1.f;
      for (int64_t i = begin; i < end; ++i) out[static_cast<size_t>(i)] = x * one;
    });
    int64_t n = 0;
    for (float f : out) n += f != 0;
    return n;
  };
  EXPECT_EQ(run(), 4096);
  {
    ScopedFlushDenormals flush(true);
#ifdef FERRY_HAS_MXCSR
    EXPECT_EQ(run(), 0) << "a worker's chunk kept subnormals under the caller's FTZ/DAZ";
#endif
  }
  EXPECT_EQ(run(), 4096);
}

}  // namespace
}  // namespace ferry::cpu_test

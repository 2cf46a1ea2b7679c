// The session's memory budget (SessionOptions::max_memory, core/memory_budget.h): outputs that
// would pass it, or whose byte count overflows, are refused naming the node, the shape and the
// bytes, before anything is allocated; the run after a refused one is fine; what runs charge is
// credited when freed.
#include <gtest/gtest.h>

#include "core/memory_budget.h"
#include "cpu/cpu_harness.h"
#include "runtime/session.h"

namespace ferry::runtime {
namespace {

using cpu_test::GraphBuilder;
using cpu_test::Int64s;
using cpu_test::Rand;

// x [2, 3] -> Tile(repeats) -> y; repeats fed at run time.
GraphBuilder TileNet() {
  GraphBuilder b;
  b.Input("x", Rand({2, 3}, 1));
  b.Input("repeats", Int64s({1, 1}));
  b.Node("Tile", {"x", "repeats"}, {"y"});
  b.Output("y");
  return b;
}

Result<std::vector<Value>> RunTile(Session& s, std::vector<int64_t> repeats) {
  return s.Run({{"x", Value(Rand({2, 3}, 1))}, {"repeats", Value(Int64s(repeats))}});
}

TEST(MemoryBudget, AnOutputOverTheBudgetIsRefusedNamingNodeShapeAndBytes) {
  for (const char* provider : {"cpu", "reference"}) {
    GraphBuilder b = TileNet();
    SessionOptions so;
    so.threads = 1;
    so.provider = provider;
    so.max_memory = 1 << 20;  // 1 MiB
    auto s = Session::Create(b.model(), so);
    ASSERT_TRUE(s.ok()) << s.status().message();
    ASSERT_TRUE(RunTile(**s, {4, 4}).ok());
    // 2000 x 300 floats = 2.3 MiB.
    auto big = RunTile(**s, {1000, 100});
    ASSERT_FALSE(big.ok()) << provider;
    EXPECT_EQ(big.status().code(), StatusCode::kInvalid);
    const std::string& m = big.status().message();
    EXPECT_NE(m.find("Tile"), std::string::npos) << m;
    EXPECT_NE(m.find("[2000,300]"), std::string::npos) << m;
    EXPECT_NE(m.find("2.3 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("memory budget"), std::string::npos) << m;
    // The next run is unaffected and what the runs allocated went back.
    auto again = RunTile(**s, {2, 2});
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_EQ(again.value()[0].tensor().shape(), (Shape{4, 6}));
  }
}

TEST(MemoryBudget, ShapesWhoseBytesOverflowAreRefused) {
  GraphBuilder b = TileNet();
  auto s = Session::Create(b.model(), SessionOptions{.threads = 1});
  ASSERT_TRUE(s.ok());
  // 2^31 x 2^31 x 4 bytes x 6 elements: past 2^63 bytes.
  auto r = RunTile(**s, {int64_t{1} << 31, int64_t{1} << 31});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  const std::string& m = r.status().message();  // Tile's prepare or the runtime's check
  EXPECT_NE(m.find("Tile"), std::string::npos) << m;
  EXPECT_TRUE(m.find("2^63") != std::string::npos ||
              m.find("too many elements") != std::string::npos)
      << m;
  // 2^40 elements of 4 bytes fit in 64 bits but not in the default budget.
  auto r2 = RunTile(**s, {int64_t{1} << 20, int64_t{1} << 20});
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("memory budget"), std::string::npos)
      << r2.status().message();
}

// Tile and Pad build index maps as long as their output's dims at prepare: an empty output with
// a dim of 2^33 (a 0 beside it) must build none (it allocated 200 GB), and a Pad to 2^39
// elements is refused by the budget before any map (fuzz/corpus/session/tile-empty-huge-dim).
TEST(MemoryBudget, TileAndPadCheckTheirOutputBeforeTheirIndexMaps) {
  for (const char* provider : {"cpu", "reference"}) {
    SCOPED_TRACE(provider);
    SessionOptions so;
    so.threads = 1;
    so.provider = provider;
    GraphBuilder t = TileNet();
    auto ts = Session::Create(t.model(), so);
    ASSERT_TRUE(ts.ok());
    // x [2, 3] x 2^62 along an axis: the dim overflows int64 (UBSan in fuzz-smoke).
    auto over = RunTile(**ts, {1, int64_t{1} << 62});
    ASSERT_FALSE(over.ok());
    EXPECT_NE(over.status().message().find("overflow"), std::string::npos)
        << over.status().message();
    auto empty = RunTile(**ts, {0, int64_t{1} << 33});
    ASSERT_TRUE(empty.ok()) << empty.status().message();
    EXPECT_EQ(empty.value()[0].tensor().shape(), (Shape{0, int64_t{3} << 33}));
    GraphBuilder p;
    p.Input("x", Rand({2, 3}, 2));
    p.Input("pads", Int64s({0, 0, 0, 0}));
    p.Node("Pad", {"x", "pads"}, {"y"});
    p.Output("y");
    auto ps = Session::Create(p.model(), so);
    ASSERT_TRUE(ps.ok());
    auto bomb = (*ps)->Run(
        {{"x", Value(Rand({2, 3}, 2))}, {"pads", Value(Int64s({0, 0, 0, int64_t{1} << 38}))}});
    ASSERT_FALSE(bomb.ok());
    EXPECT_NE(bomb.status().message().find("memory budget"), std::string::npos)
        << bomb.status().message();
    auto fine = (*ps)->Run({{"x", Value(Rand({2, 3}, 2))}, {"pads", Value(Int64s({0, 1, 0, 1}))}});
    ASSERT_TRUE(fine.ok()) << fine.status().message();
    EXPECT_EQ(fine.value()[0].tensor().shape(), (Shape{2, 5}));
    // An output that fits once: the run step must not check it again after it is charged (that
    // second check failed, and RunPad's .value() threw: exit 70 in the campaign's Loop mutant).
    SessionOptions tight = so;
    tight.max_memory = 3 << 20;  // the [2, 2^18 + 3] float output is 2 MiB
    auto ts2 = Session::Create(p.model(), tight);
    ASSERT_TRUE(ts2.ok());
    auto once = (*ts2)->Run(
        {{"x", Value(Rand({2, 3}, 2))}, {"pads", Value(Int64s({0, 0, 0, int64_t{1} << 18}))}});
    ASSERT_TRUE(once.ok()) << once.status().message();
    EXPECT_EQ(once.value()[0].tensor().shape(), (Shape{2, (int64_t{1} << 18) + 3}));
  }
}

TEST(MemoryBudget, ConstantOfShapeAndExpandBombsAreRefused) {
  GraphBuilder b;
  b.Input("shape", Int64s({2, 2}));
  b.Node("ConstantOfShape", {"shape"}, {"c"});
  b.Node("Expand", {"c", "shape"}, {"y"});
  b.Output("y");
  SessionOptions so;
  so.threads = 1;
  so.max_memory = 64 << 20;
  auto s = Session::Create(b.model(), so);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Run({{"shape", Value(Int64s({3, 5}))}}).ok());
  auto r = (*s)->Run({{"shape", Value(Int64s({1 << 20, 1 << 20}))}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ConstantOfShape"), std::string::npos)
      << r.status().message();
}

TEST(MemoryBudget, RunsChargeWhatTheyHoldAndCreditItWhenFreed) {
  GraphBuilder b = TileNet();
  SessionOptions so;
  so.threads = 1;
  so.max_memory = 64 << 20;
  auto s = Session::Create(b.model(), so);
  ASSERT_TRUE(s.ok());
  const uint64_t before = (*s)->memory().in_use();
  {
    auto out = RunTile(**s, {100, 100});  // 200 x 300 floats, a graph output (owned)
    ASSERT_TRUE(out.ok());
    EXPECT_GE((*s)->memory().in_use(), before + 200 * 300 * 4);
    EXPECT_GE((*s)->memory().peak(), 200u * 300 * 4);
  }
  EXPECT_EQ((*s)->memory().in_use(), before);  // the output went: credited
  EXPECT_EQ((*s)->memory().limit(), 64u << 20);
}

TEST(MemoryBudget, ScopeChargesTensorsOnItsThreadOnly) {
  auto budget = std::make_shared<MemoryBudget>(1 << 20);
  Tensor outside(DType::kFloat, {256});
  {
    MemoryBudget::Scope scope(budget);
    Tensor t(DType::kFloat, {100});  // 400 bytes, rounded to 448
    EXPECT_EQ(budget->in_use(), 448u);
    Tensor u = Tensor::Uninitialized(DType::kInt64, {8});
    EXPECT_EQ(budget->in_use(), 448u + 64u);
    Tensor v = t;  // shares storage: nothing more
    EXPECT_EQ(budget->in_use(), 512u);
  }
  EXPECT_EQ(budget->in_use(), 0u);
  EXPECT_EQ(budget->peak(), 512u);
  EXPECT_EQ(MemoryBudget::Current(), nullptr);
  EXPECT_TRUE(budget->Fits(1 << 20));
  EXPECT_FALSE(budget->Fits((1 << 20) + 1));
}

TEST(MemoryBudget, SizesParseAndFormat) {
  EXPECT_EQ(*ParseByteSize("--max-memory", "8G"), uint64_t{8} << 30);
  EXPECT_EQ(*ParseByteSize("--max-memory", "512m"), uint64_t{512} << 20);
  EXPECT_EQ(*ParseByteSize("--max-memory", "64KiB"), uint64_t{64} << 10);
  EXPECT_EQ(*ParseByteSize("--max-memory", "1000"), 1000u);
  EXPECT_EQ(ParseByteSize("--max-memory", "8X").status().code(), StatusCode::kUsage);
  EXPECT_EQ(ParseByteSize("--max-memory", "G").status().code(), StatusCode::kUsage);
  EXPECT_EQ(ParseByteSize("--max-memory", "99999999999999999999").status().code(),
            StatusCode::kUsage);
  EXPECT_EQ(ParseByteSize("--max-memory", "99999999999T").status().code(), StatusCode::kUsage);
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(3 << 20), "3.0 MiB");
  auto bytes = TensorBytes(DType::kFloat, {-1, 3}, "x");
  EXPECT_EQ(bytes.status().code(), StatusCode::kInvalid);
  EXPECT_EQ(*TensorBytes(DType::kInt64, {0, int64_t{1} << 62}, "x"), 0u);
  auto over = TensorBytes(DType::kFloat, {int64_t{1} << 31, int64_t{1} << 31}, "y");
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("2^63"), std::string::npos) << over.status().message();
  uint64_t b = 0;
  EXPECT_FALSE(TensorBytesChecked(DType::kFloat, {int64_t{1} << 31, int64_t{1} << 31}, &b));
  EXPECT_TRUE(TensorBytesChecked(DType::kFloat, {int64_t{1} << 30, int64_t{1} << 30}, &b));
  EXPECT_EQ(b, uint64_t{1} << 62);
  EXPECT_GT(DefaultMaxMemory(), 0u);
}

}  // namespace
}  // namespace ferry::runtime

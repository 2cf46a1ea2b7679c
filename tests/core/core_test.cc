#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include <cstdio>

#include <gtest/gtest.h>

#include "core/buffer_pool.h"
#include "core/half.h"
#include "core/npy.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace ferry {
namespace {

TEST(Half, RoundTripsAndRoundsToNearestEven) {
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f})
    EXPECT_EQ(static_cast<float>(Float16(f)), f) << f;
  EXPECT_EQ(Float16(1.0f + 1.0f / 2048).bits, Float16(1.0f).bits);  // tie -> even
  EXPECT_EQ(Float16(1.0f + 3.0f / 2048).bits, Float16(1.0f + 4.0f / 2048).bits);
  EXPECT_TRUE(std::isinf(static_cast<float>(Float16(70000.0f))));
  EXPECT_TRUE(std::isnan(static_cast<float>(Float16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(static_cast<float>(BFloat16(1.5f)), 1.5f);
  EXPECT_EQ(BFloat16(1.0f + 1.0f / 256).bits, BFloat16(1.0f).bits);
}

TEST(Npy, RoundTripsEveryDtypeAndShape) {
  Tensor f = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto r = ParseNpy(SerializeNpy(f), "mem");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value().shape(), (Shape{2, 3}));
  EXPECT_EQ(r.value().data<float>()[5], 6.0f);
  Tensor scalar = Tensor::FromVector<int64_t>({42}, {});
  auto r2 = ParseNpy(SerializeNpy(scalar), "mem");
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2.value().rank(), 0);
  EXPECT_EQ(r2.value().data<int64_t>()[0], 42);
  Tensor s(DType::kString, {2});
  s.data<std::string>()[0] = "héllo";
  s.data<std::string>()[1] = "";
  auto r3 = ParseNpy(SerializeNpy(s), "mem");
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(r3.value().data<std::string>()[0], "héllo");
  Tensor b = Tensor::FromVector<bool>({true, false, true}, {3});
  auto r4 = ParseNpy(SerializeNpy(b), "mem");
  ASSERT_TRUE(r4.ok());
  EXPECT_EQ(r4.value().dtype(), DType::kBool);
}

// Files that report no size (/proc) are read to their end, regular files exactly.
TEST(ReadFileBytes, ReadsProcFilesAndRegularFiles) {
  auto cmd = ReadFileBytes("/proc/self/cmdline");
  ASSERT_TRUE(cmd.ok());
  EXPECT_FALSE(cmd.value().empty());
  const std::string path = ::testing::TempDir() + "ferry_read_bytes_test.bin";
  std::string want(200000, '\0');
  for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<char>(i * 7);
  ASSERT_TRUE(WriteFileAtomic(path, want).ok());
  auto got = ReadFileBytes(path);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got.value(), want);
  std::remove(path.c_str());
  EXPECT_FALSE(ReadFileBytes(path).ok());
}

TEST(Npy, RejectsGarbageAndTruncation) {
  EXPECT_EQ(ParseNpy("hello", "x.npy").status().code(), StatusCode::kInvalid);
  std::string good = SerializeNpy(Tensor(DType::kFloat, {4, 4}));
  auto r = ParseNpy(good.substr(0, good.size() - 3), "t.npy");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("t.npy"), std::string::npos);
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos);
}

// Found by fuzz/fuzz_npy: empty arrays whose 0 comes after a nonzero dim were refused as
// truncated; a header's element count is checked against the bytes without overflow; a
// '<U' string with a code point that is not a Unicode scalar value is refused (it wrote
// invalid UTF-8).
TEST(Npy, EmptyArraysHugeHeadersAndBadCodePoints) {
  for (const Shape& shape : {Shape{2, 0}, Shape{0, 5}, Shape{3, 0, 2}}) {
    auto r = ParseNpy(SerializeNpy(Tensor(DType::kFloat, shape)), "e.npy");
    ASSERT_TRUE(r.ok()) << ShapeToString(shape) << ": " << r.status().message();
    EXPECT_EQ(r->shape(), shape);
  }
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 4), }";
  header += std::string(63 - (10 + header.size()) % 64, ' ') + "\n";
  std::string bomb = std::string("\x93NUMPY\x01\x00", 8);
  bomb += static_cast<char>(header.size() & 0xFF);
  bomb += static_cast<char>(header.size() >> 8);
  bomb += header + std::string(16, '\0');
  auto r = ParseNpy(bomb, "bomb.npy");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("truncated .npy data"), std::string::npos)
      << r.status().message();
  Tensor strs(DType::kString, {1});
  strs.data<std::string>()[0] = "ab";
  std::string u = SerializeNpy(strs);
  ASSERT_TRUE(ParseNpy(u, "u.npy").ok());
  const size_t at = u.size() - 8;  // the first of 'a', 'b' as UTF-32 little-endian
  ASSERT_EQ(u[at], 'a');
  u[at + 2] = 0x11;  // U+110061: past U+10FFFF
  auto bad = ParseNpy(u, "u.npy");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a Unicode scalar value"), std::string::npos)
      << bad.status().message();
}

// fuzz/corpus/npy/element-count-overflow.npy: a header whose dims multiply past int64 (UBSan's
// signed overflow in NumElements) and an empty array with a huge dim.
TEST(NumElements, ZeroWinsAndOverflowSaturates) {
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(NumElements({2, 3, 4}), 24);
  EXPECT_EQ(NumElements({int64_t{1} << 40, int64_t{1} << 40, 0}), 0);
  EXPECT_EQ(NumElements({int64_t{1} << 40, int64_t{1} << 40}), std::numeric_limits<int64_t>::max());
  // fuzz/corpus/npy/fortran-empty-strides-overflow.npy: the strides of an empty array.
  EXPECT_EQ(Strides({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(Strides({0, int64_t{1} << 40, int64_t{1} << 40})[0],
            std::numeric_limits<int64_t>::max());
}

TEST(ThreadPool, CoversRangeOnceInDeterministicChunks) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(1001);
  pool.ParallelFor(1001, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  std::vector<std::pair<int64_t, int64_t>> chunks(2);
  std::atomic<int> k{0};
  pool.ParallelFor(10, 1, [&](int64_t b, int64_t e) { chunks[static_cast<size_t>(k++)] = {b, e}; });
  std::sort(chunks.begin(), chunks.end());
  EXPECT_EQ(chunks[0], (std::pair<int64_t, int64_t>{0, 5}));
  EXPECT_EQ(chunks[1], (std::pair<int64_t, int64_t>{5, 10}));
}

// A released buffer goes back to its pool and serves the next request of its size; small
// requests are not pooled; idle memory stays under the cap; a buffer outliving its pool is freed.
TEST(BufferPool, ReusesReleasedBuffersWithinItsCap) {
  auto pool = BufferPool::Create(1024, 4096);
  EXPECT_FALSE(pool->Pools(1000));
  EXPECT_TRUE(pool->Pools(1024));
  void* a = nullptr;
  {
    std::shared_ptr<void> owner = pool->Get(2000, &a);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
    std::memset(a, 7, 2000);
  }
  EXPECT_EQ(pool->idle_bytes(), 2048u);  // rounded up to 64
  void* b = nullptr;
  std::shared_ptr<void> kept = pool->Get(2010, &b);  // the same rounded size
  EXPECT_EQ(b, a);
  EXPECT_EQ(pool->reused(), 1u);
  EXPECT_EQ(pool->idle_bytes(), 0u);
  void* c = nullptr;
  void* d = nullptr;
  {
    std::shared_ptr<void> o1 = pool->Get(3000, &c), o2 = pool->Get(3000, &d);
    EXPECT_NE(c, d);
  }
  EXPECT_LE(pool->idle_bytes(), 4096u);  // one of the two 3008-byte buffers kept, not both
  std::shared_ptr<void> late = pool->Get(5000, &c);
  pool.reset();  // `kept` and `late` outlive it
  std::memset(c, 1, 5000);
}

}  // namespace
}  // namespace ferry

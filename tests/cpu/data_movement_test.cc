// The cpu Gather and Transpose kernels (ops/cpu/data_movement.cc) against the reference kernels:
// seeded awkward shapes, every axis, negative and scalar indices, several dtypes, permutations
// that keep or move the last axis, copies large enough to split over threads. Exact match.
#include <cstring>
#include <numeric>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "graph_builders.h"
#include "ir/graph.h"
#include "runtime/session.h"

namespace ferry {
namespace {

using runtime::Session;
using runtime::SessionOptions;
using testing::MakeNode;

// Random bytes (compared bytewise, so any dtype works).
Tensor Iota(DType dt, const Shape& shape, uint32_t seed) {
  Tensor t(dt, shape);
  std::mt19937 gen(seed);
  auto* p = static_cast<unsigned char*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<unsigned char>(gen());
  return t;
}

struct Graph1 {
  std::shared_ptr<ir::Model> model = std::make_shared<ir::Model>();
  std::vector<std::pair<std::string, Value>> feeds;
  Graph1() {
    model->ir_version = 8;
    model->opset_imports.push_back({"", 17});
  }
  void Input(const std::string& name, Tensor t) {
    model->graph.inputs.push_back({name, {}, ""});
    feeds.emplace_back(name, Value(std::move(t)));
  }
};

// Runs both providers; returns the cpu node's provider ("" when a run failed).
std::string ExpectSame(Graph1& g, int threads) {
  SessionOptions ro;
  ro.provider = "reference";
  ro.threads = threads;
  auto ref = Session::Create(g.model, ro);
  SessionOptions co;
  co.threads = threads;
  auto cpu = Session::Create(g.model, co);
  EXPECT_TRUE(ref.ok() && cpu.ok());
  if (!ref.ok() || !cpu.ok()) return "";
  auto want = (*ref)->Run(g.feeds);
  auto got = (*cpu)->Run(g.feeds);
  EXPECT_TRUE(want.ok()) << want.status().message();
  EXPECT_TRUE(got.ok()) << got.status().message();
  if (!want.ok() || !got.ok()) return "";
  const Tensor& w = (*want)[0].tensor();
  const Tensor& c = (*got)[0].tensor();
  EXPECT_EQ(c.dtype(), w.dtype());
  EXPECT_EQ(c.shape(), w.shape());
  if (c.shape() != w.shape()) return "";
  EXPECT_EQ(std::memcmp(c.raw(), w.raw(), w.nbytes()), 0) << "outputs differ";
  return (*cpu)->node_report().back().provider;
}

TEST(CpuGather, MatchesReference) {
  struct Case {
    DType dt;
    Shape data, idx;
    int64_t axis;
    bool int32;
  };
  const Case cases[] = {
      {DType::kFloat, {13, 7}, {3, 5}, 0, false},         // embedding lookup
      {DType::kFloat, {1, 127}, {1}, 0, true},            //
      {DType::kFloat, {3, 13, 5}, {}, 1, false},          // scalar index drops the axis
      {DType::kInt64, {3, 13, 5}, {4}, -1, true},         // last axis: one-element rows
      {DType::kUint8, {2, 3, 13, 3}, {2, 2}, 2, false},   //
      {DType::kDouble, {127}, {13}, 0, false},            // rank 1
      {DType::kFloat16, {5, 3}, {7}, 1, true},            //
      {DType::kFloat, {3000, 127}, {17, 127}, 0, false},  // 1.1 MB: split over threads
  };
  uint32_t seed = 10;
  for (const Case& c : cases)
    for (int threads : {1, 2}) {
      SCOPED_TRACE(ShapeToString(c.data) + " idx " + ShapeToString(c.idx) +
                   " axis=" + std::to_string(c.axis));
      Graph1 g;
      g.Input("data", Iota(c.dt, c.data, seed++));
      const int64_t dim = c.data[static_cast<size_t>(
          c.axis < 0 ? c.axis + static_cast<int64_t>(c.data.size()) : c.axis)];
      Tensor idx(c.int32 ? DType::kInt32 : DType::kInt64, c.idx);
      std::mt19937 gen(seed++);
      std::uniform_int_distribution<int64_t> d(-dim, dim - 1);  // negative indices too
      for (int64_t i = 0; i < idx.size(); ++i) {
        if (c.int32)
          idx.data<int32_t>()[i] = static_cast<int32_t>(d(gen));
        else
          idx.data<int64_t>()[i] = d(gen);
      }
      g.Input("idx", std::move(idx));
      ir::Node n = MakeNode("Gather", {"data", "idx"}, {"y"});
      ir::Attribute a;
      a.name = "axis";
      a.type = ir::AttrType::kInt;
      a.i = c.axis;
      n.attributes.push_back(std::move(a));
      g.model->graph.nodes.push_back(std::move(n));
      g.model->graph.outputs.push_back({"y", {}, ""});
      EXPECT_EQ(ExpectSame(g, threads), "cpu");
    }
}

TEST(CpuGather, OutOfRangeIndexIsTheReferenceError) {
  Graph1 g;
  g.Input("data", Iota(DType::kFloat, {13, 3}, 1));
  g.Input("idx", Tensor::FromVector<int64_t>({2, 13}, {2}));
  g.model->graph.nodes.push_back(MakeNode("Gather", {"data", "idx"}, {"y"}));
  g.model->graph.outputs.push_back({"y", {}, ""});
  auto s = Session::Create(g.model, {.threads = 1});
  ASSERT_TRUE(s.ok());
  auto r = (*s)->Run(g.feeds);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("out of range"), std::string::npos) << r.status().message();
}

TEST(CpuTranspose, MatchesReference) {
  struct Case {
    DType dt;
    Shape shape;
    std::vector<int64_t> perm;  // empty: the default (reversed)
  };
  const Case cases[] = {
      {DType::kFloat, {32, 8, 64}, {1, 0, 2}},  // the GRU encoder's
      {DType::kFloat, {13, 3, 127}, {1, 0, 2}},
      {DType::kFloat, {13, 127}, {}},  // 2-D: strided runs
      {DType::kFloat, {1, 3, 13, 7}, {0, 2, 3, 1}},
      {DType::kFloat, {2, 3, 5, 7, 3}, {4, 1, 0, 3, 2}},
      {DType::kFloat, {3, 5, 7, 2}, {0, 1, 2, 3}},  // identity: one run
      {DType::kFloat, {3, 5, 1}, {0, 2, 1}},        // a size-1 dim moved
      {DType::kInt64, {3, 13, 5}, {2, 0, 1}},
      {DType::kUint8, {7, 13}, {1, 0}},
      {DType::kFloat16, {3, 4, 5, 6}, {3, 2, 1, 0}},
      {DType::kDouble, {127}, {}},
      {DType::kFloat, {127, 13, 160}, {2, 1, 0}},  // 1 MB: split over threads
      {DType::kFloat, {127, 13, 160}, {1, 0, 2}},
      // Inner 2-D transposes (16x16 tiles, 4-byte elements): BERT's K^T, ragged tile edges, an
      // outer dim, a merged row dim, int32, and one split over threads.
      {DType::kFloat, {128, 4, 64}, {1, 2, 0}},
      {DType::kFloat, {17, 33}, {}},
      {DType::kFloat, {3, 19, 5, 21}, {0, 3, 1, 2}},
      {DType::kInt32, {2, 40, 18}, {0, 2, 1}},
      {DType::kFloat, {300, 257}, {}},
  };
  uint32_t seed = 100;
  for (const Case& c : cases)
    for (int threads : {1, 2}) {
      SCOPED_TRACE(ShapeToString(c.shape));
      Graph1 g;
      g.Input("x", Iota(c.dt, c.shape, seed++));
      ir::Node n = MakeNode("Transpose", {"x"}, {"y"});
      if (!c.perm.empty()) {
        ir::Attribute a;
        a.name = "perm";
        a.type = ir::AttrType::kInts;
        a.ints = c.perm;
        n.attributes.push_back(std::move(a));
      }
      g.model->graph.nodes.push_back(std::move(n));
      g.model->graph.outputs.push_back({"y", {}, ""});
      EXPECT_EQ(ExpectSame(g, threads), "cpu");
    }
}

}  // namespace
}  // namespace ferry

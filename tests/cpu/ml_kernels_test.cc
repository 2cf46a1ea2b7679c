// cpu kernels of ai.onnx.ml (ops/cpu/ml_tree.cc, ml_linear.cc) against the reference kernels on
// seeded random forests and linear models of awkward sizes: the outputs must be bit-identical
// (both accumulate in double in the same order), and the node must have run on the cpu kernel.
#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "ops/ml_util.h"

namespace ferry::testing {
namespace {

struct Forest {
  std::vector<int64_t> tree, node, feature, yes, no, missing;
  std::vector<std::string> mode;
  std::vector<float> value;
  std::vector<int64_t> t_tree, t_node, t_id;
  std::vector<float> t_weight;
};

// `trees` random trees of depth <= max_depth over `c` features; leaves vote for one or two of
// `targets` targets; `mode` for every branch; a few nodes send NaN to their true branch.
Forest RandomForest(int trees, int max_depth, int64_t c, int64_t targets, const std::string& mode,
                    uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> thr(-1.f, 1.f), w(-0.5f, 1.f);
  Forest f;
  for (int t = 0; t < trees; ++t) {
    int64_t next = 0;
    // (node id, depth)
    std::vector<std::pair<int64_t, int>> todo{{next++, 0}};
    while (!todo.empty()) {
      auto [id, d] = todo.back();
      todo.pop_back();
      f.tree.push_back(t);
      f.node.push_back(id);
      const bool leaf = d >= max_depth || (d > 1 && gen() % 4 == 0);
      if (leaf) {
        f.feature.push_back(0);
        f.mode.push_back("LEAF");
        f.value.push_back(0);
        f.yes.push_back(0);
        f.no.push_back(0);
        f.missing.push_back(0);
        const int votes = 1 + static_cast<int>(gen() % 2);
        for (int v = 0; v < votes; ++v) {
          f.t_tree.push_back(t);
          f.t_node.push_back(id);
          f.t_id.push_back(static_cast<int64_t>(gen() % static_cast<uint32_t>(targets)));
          f.t_weight.push_back(w(gen));
        }
        continue;
      }
      const int64_t a = next++, b = next++;
      f.feature.push_back(static_cast<int64_t>(gen() % static_cast<uint32_t>(c)));
      f.mode.push_back(mode);
      f.value.push_back(thr(gen));
      f.yes.push_back(a);
      f.no.push_back(b);
      f.missing.push_back(gen() % 5 == 0 ? 1 : 0);
      todo.push_back({a, d + 1});
      todo.push_back({b, d + 1});
    }
  }
  return f;
}

MlNode& SetForest(MlNode& n, const Forest& f, bool clf) {
  n.Ints("nodes_treeids", f.tree)
      .Ints("nodes_nodeids", f.node)
      .Ints("nodes_featureids", f.feature)
      .Strings("nodes_modes", f.mode)
      .Floats("nodes_values", f.value)
      .Ints("nodes_truenodeids", f.yes)
      .Ints("nodes_falsenodeids", f.no)
      .Ints("nodes_missing_value_tracks_true", f.missing);
  const std::string p = clf ? "class_" : "target_";
  return n.Ints(p + "treeids", f.t_tree)
      .Ints(p + "nodeids", f.t_node)
      .Ints(p + "ids", f.t_id)
      .Floats(p + "weights", f.t_weight);
}

Tensor Features(int64_t n, int64_t c, uint32_t seed) {
  Tensor t(DType::kFloat, {n, c});
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.2f, 1.2f);
  for (auto& x : t.span<float>()) x = gen() % 17 == 0 ? std::nanf("") : d(gen);
  return t;
}

void ExpectSameBits(const std::vector<Value>& a, const std::vector<Value>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    const Tensor& x = a[k].tensor();
    const Tensor& y = b[k].tensor();
    ASSERT_EQ(x.shape(), y.shape()) << "output " << k;
    ASSERT_EQ(x.dtype(), y.dtype()) << "output " << k;
    if (x.dtype() == DType::kString) {
      for (int64_t i = 0; i < x.size(); ++i)
        EXPECT_EQ(x.data<std::string>()[i], y.data<std::string>()[i]) << i;
    } else {
      EXPECT_EQ(0, std::memcmp(x.raw(), y.raw(), x.nbytes())) << "output " << k;
    }
  }
}

// Runs on the reference and on the cpu provider (1 and 2 threads): same bits, cpu kernel used.
void ExpectCpuMatches(const MlNode& n) {
  auto want = n.Run("reference", 1);
  ASSERT_TRUE(want.ok()) << want.status().message();
  for (int threads : {1, 2}) {
    std::vector<runtime::NodeReport> report;
    auto got = n.Run("cpu", threads, &report);
    ASSERT_TRUE(got.ok()) << got.status().message();
    ExpectSameBits(got.value(), want.value());
    ASSERT_EQ(report.size(), 1u);
    EXPECT_EQ(report[0].provider, "cpu") << n.node().op_type;
  }
}

TEST(CpuMlTree, RegressorsMatchReference) {
  uint32_t seed = 1;
  for (int64_t c : {1, 13, 127}) {
    for (int64_t rows : {1, 13, 127, 300}) {
      for (const char* mode : {"BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT"}) {
        for (const char* agg : {"SUM", "AVERAGE", "MIN", "MAX"}) {
          const int64_t targets = 1 + (seed % 3);
          Forest f = RandomForest(5 + static_cast<int>(seed % 7), 1 + static_cast<int>(seed % 9), c,
                                  targets, mode, seed);
          MlNode n("TreeEnsembleRegressor", 1);
          SetForest(n, f, false)
              .Int("n_targets", targets)
              .Str("aggregate_function", agg)
              .Floats("base_values", std::vector<float>(static_cast<size_t>(targets), 0.25f))
              .In("X", Value(Features(rows, c, seed)))
              .Out("Y");
          SCOPED_TRACE(::testing::Message()
                       << "c " << c << " rows " << rows << " " << mode << " " << agg);
          ExpectCpuMatches(n);
          ++seed;
        }
      }
    }
  }
}

TEST(CpuMlTree, ClassifiersMatchReference) {
  uint32_t seed = 100;
  for (int64_t classes : {2, 3, 10}) {
    for (int64_t c : {1, 13, 64}) {
      for (int64_t rows : {1, 63, 65, 200}) {
        for (const char* post : {"NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO"}) {
          // Binary models vote on one class column (gradient boosting) or on both.
          const bool one_column = classes == 2 && seed % 2 == 0;
          Forest f = RandomForest(3 + static_cast<int>(seed % 20), 2 + static_cast<int>(seed % 10),
                                  c, one_column ? 1 : classes, "BRANCH_LEQ", seed);
          MlNode n("TreeEnsembleClassifier", 1);
          SetForest(n, f, true)
              .Str("post_transform", post)
              .In("X", Value(Features(rows, c, seed)))
              .Out("label")
              .Out("scores");
          if (seed % 3 == 0) {
            std::vector<std::string> labels;
            for (int64_t k = 0; k < classes; ++k) labels.push_back("class_" + std::to_string(k));
            n.Strings("classlabels_strings", labels);
          } else {
            std::vector<int64_t> labels;
            for (int64_t k = 0; k < classes; ++k) labels.push_back(10 * k + 1);
            n.Ints("classlabels_int64s", labels);
          }
          if (seed % 4 == 1)
            n.Floats("base_values",
                     std::vector<float>(static_cast<size_t>(one_column ? 1 : classes), -0.5f));
          SCOPED_TRACE(::testing::Message()
                       << "classes " << classes << " c " << c << " rows " << rows << " " << post);
          ExpectCpuMatches(n);
          ++seed;
        }
      }
    }
  }
}

TEST(CpuMlTree, MixedModesDeclineToReference) {
  Forest f = RandomForest(4, 4, 5, 1, "BRANCH_LEQ", 7);
  for (size_t i = 0; i < f.mode.size(); ++i)
    if (f.mode[i] != "LEAF" && i % 2) f.mode[i] = "BRANCH_EQ";
  MlNode n("TreeEnsembleRegressor", 1);
  SetForest(n, f, false).In("X", Value(Features(9, 5, 7))).Out("Y");
  std::vector<runtime::NodeReport> report;
  auto got = n.Run("cpu", 1, &report);
  ASSERT_TRUE(got.ok()) << got.status().message();
  auto want = n.Run("reference", 1);
  ASSERT_TRUE(want.ok());
  ExpectSameBits(got.value(), want.value());
  EXPECT_EQ(report[0].provider, "reference (cpu declined)");
}

TEST(CpuMlLinear, ClassifiersAndRegressorsMatchReference) {
  uint32_t seed = 500;
  for (int64_t c : {1, 13, 127}) {
    for (int64_t rows : {1, 13, 127, 1000}) {
      for (int64_t targets : {1, 3}) {
        std::mt19937 gen(seed);
        std::uniform_real_distribution<float> d(-1.f, 1.f);
        std::vector<float> w(static_cast<size_t>(c * targets)), b(static_cast<size_t>(targets));
        for (auto& x : w) x = d(gen);
        for (auto& x : b) x = d(gen);
        Tensor x = Features(rows, c, seed);
        for (auto& v : x.span<float>())
          if (std::isnan(v)) v = 0.5f;
        MlNode reg("LinearRegressor");
        reg.Floats("coefficients", w)
            .Floats("intercepts", b)
            .Int("targets", targets)
            .In("X", Value(x))
            .Out("Y");
        ExpectCpuMatches(reg);
        MlNode clf("LinearClassifier");
        std::vector<int64_t> labels(static_cast<size_t>(targets == 1 ? 2 : targets));
        for (size_t k = 0; k < labels.size(); ++k) labels[k] = static_cast<int64_t>(k) + 3;
        clf.Floats("coefficients", w)
            .Floats("intercepts", b)
            .Ints("classlabels_ints", labels)
            .Str("post_transform", targets == 1 ? "LOGISTIC" : "SOFTMAX")
            .In("X", Value(x))
            .Out("label")
            .Out("scores");
        ExpectCpuMatches(clf);
        ++seed;
      }
    }
  }
}

}  // namespace
}  // namespace ferry::testing

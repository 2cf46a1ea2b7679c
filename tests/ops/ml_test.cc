// ai.onnx.ml reference kernels: small hand-computed cases per op family, and validation errors
// naming the node, the attribute and the values seen and expected.
#include <cmath>

#include <gtest/gtest.h>

#include "ops/ml_util.h"

namespace ferry::testing {
namespace {

std::vector<float> F(const Tensor& t) {
  return {t.data<float>(), t.data<float>() + t.size()};
}
std::vector<int64_t> I(const Tensor& t) {
  return {t.data<int64_t>(), t.data<int64_t>() + t.size()};
}
float Sigmoid(float x) {
  return 1.f / (1.f + std::exp(-x));
}

// Two trees over two features (tree 0 LEQ, tree 1 LT); leaves tree0: 1, 3, 4, tree1: 1, 2.
MlNode& Trees(MlNode& n, bool missing) {
  return n.Ints("nodes_treeids", {0, 0, 0, 0, 0, 1, 1, 1})
      .Ints("nodes_nodeids", {0, 1, 2, 3, 4, 0, 1, 2})
      .Ints("nodes_featureids", {0, 0, 1, 0, 0, 1, 0, 0})
      .Strings("nodes_modes",
               {"BRANCH_LEQ", "LEAF", "BRANCH_LEQ", "LEAF", "LEAF", "BRANCH_LT", "LEAF", "LEAF"})
      .Floats("nodes_values", {0.5f, 0, 1.0f, 0, 0, 2.f, 0, 0})
      .Ints("nodes_truenodeids", {1, 0, 3, 0, 0, 1, 0, 0})
      .Ints("nodes_falsenodeids", {2, 0, 4, 0, 0, 2, 0, 0})
      .Ints("nodes_missing_value_tracks_true", {missing ? 1 : 0, 0, 0, 0, 0, 0, 0, 0});
}

Tensor Rows4() {
  const float nan = std::nanf("");
  return Tensor::FromVector<float>({0, 0, 1, 0.5f, 1, 3, nan, 3}, {4, 2});
}

MlNode Regressor(const std::string& agg, bool missing) {
  MlNode n("TreeEnsembleRegressor", 1);
  Trees(n, missing)
      .Ints("target_treeids", {0, 0, 0, 1, 1})
      .Ints("target_nodeids", {1, 3, 4, 1, 2})
      .Ints("target_ids", {0, 0, 0, 0, 0})
      .Floats("target_weights", {1, 2, 3, 10, 20})
      .Floats("base_values", {100})
      .Str("aggregate_function", agg)
      .In("X", Value(Rows4()))
      .Out("Y");
  return n;
}

TEST(MlTree, RegressorAggregatesAndMissingValues) {
  auto sum = Regressor("SUM", true).Run();
  ASSERT_TRUE(sum.ok()) << sum.status().message();
  EXPECT_EQ(sum.value()[0].tensor().shape(), (Shape{4, 1}));
  EXPECT_EQ(F(sum.value()[0].tensor()), (std::vector<float>{111, 112, 123, 121}));
  auto nomiss = Regressor("SUM", false).Run();
  ASSERT_TRUE(nomiss.ok());
  EXPECT_EQ(F(nomiss.value()[0].tensor())[3], 123);
  auto avg = Regressor("AVERAGE", false).Run();
  ASSERT_TRUE(avg.ok());
  EXPECT_EQ(F(avg.value()[0].tensor()), (std::vector<float>{105.5f, 106, 111.5f, 111.5f}));
  auto mx = Regressor("MAX", false).Run();
  ASSERT_TRUE(mx.ok());
  EXPECT_EQ(F(mx.value()[0].tensor()), (std::vector<float>{110, 110, 120, 120}));
  auto mn = Regressor("MIN", false).Run();
  ASSERT_TRUE(mn.ok());
  EXPECT_EQ(F(mn.value()[0].tensor()), (std::vector<float>{101, 102, 103, 103}));
}

TEST(MlTree, ClassifierSoftmaxWithStringLabels) {
  MlNode n("TreeEnsembleClassifier", 1);
  Trees(n, false)
      .Ints("class_treeids", {0, 0, 0, 1, 1})
      .Ints("class_nodeids", {1, 3, 4, 1, 2})
      .Ints("class_ids", {0, 1, 2, 0, 2})
      .Floats("class_weights", {1, 1, 1, 0.5f, 0.5f})
      .Strings("classlabels_strings", {"a", "b", "c"})
      .Str("post_transform", "SOFTMAX")
      .In("X", Value(Rows4()))
      .Out("label")
      .Out("scores");
  auto r = n.Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Tensor& lab = r.value()[0].tensor();
  EXPECT_EQ(lab.data<std::string>()[0], "a");
  EXPECT_EQ(lab.data<std::string>()[1], "b");
  EXPECT_EQ(lab.data<std::string>()[2], "c");
  const auto z = F(r.value()[1].tensor());
  const float e = std::exp(1.5f), s = e + 2;
  EXPECT_NEAR(z[0], e / s, 1e-6);
  EXPECT_NEAR(z[1], 1 / s, 1e-6);
}

TEST(MlTree, BinaryClassifierOnOneClassColumn) {
  // Random forests from skl2onnx: every vote on class 0 = P(second label); scores [1 - p, p].
  MlNode n("TreeEnsembleClassifier", 1);
  Trees(n, false)
      .Ints("class_treeids", {0, 0, 0, 1, 1})
      .Ints("class_nodeids", {1, 3, 4, 1, 2})
      .Ints("class_ids", {0, 0, 0, 0, 0})
      .Floats("class_weights", {0.2f, 0.3f, 0.4f, 0.1f, 0.4f})
      .Ints("classlabels_int64s", {4, 8})
      .In("X", Value(Rows4()))
      .Out("label")
      .Out("scores");
  auto r = n.Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(I(r.value()[0].tensor()), (std::vector<int64_t>{4, 4, 8, 8}));
  const auto z = F(r.value()[1].tensor());
  EXPECT_NEAR(z[0], 0.7f, 1e-6);
  EXPECT_NEAR(z[1], 0.3f, 1e-6);
  EXPECT_NEAR(z[5], 0.8f, 1e-6);
}

TEST(MlTree, BadBranchAndCycleAreNamed) {
  MlNode bad("TreeEnsembleRegressor", 1);
  bad.Ints("nodes_treeids", {0, 0, 0})
      .Ints("nodes_nodeids", {0, 1, 2})
      .Ints("nodes_featureids", {0, 0, 0})
      .Strings("nodes_modes", {"BRANCH_LEQ", "LEAF", "LEAF"})
      .Floats("nodes_values", {0, 0, 0})
      .Ints("nodes_truenodeids", {40, 0, 0})
      .Ints("nodes_falsenodeids", {2, 0, 0})
      .Ints("target_treeids", {0})
      .Ints("target_nodeids", {1})
      .Ints("target_ids", {0})
      .Floats("target_weights", {1})
      .In("X", Value(Tensor::FromVector<float>({1}, {1, 1})))
      .Out("Y");
  auto r = bad.Run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(
      r.status().message().find(
          "TreeEnsembleRegressor 'clf': nodes_truenodeids[0] = 40, expected a node id of tree 0"),
      std::string::npos)
      << r.status().message();

  MlNode cyc("TreeEnsembleRegressor", 1);
  cyc.Ints("nodes_treeids", {0, 0, 0})
      .Ints("nodes_nodeids", {0, 1, 2})
      .Ints("nodes_featureids", {0, 0, 0})
      .Strings("nodes_modes", {"BRANCH_LEQ", "BRANCH_LEQ", "LEAF"})
      .Floats("nodes_values", {0, 0, 0})
      .Ints("nodes_truenodeids", {1, 0, 0})
      .Ints("nodes_falsenodeids", {2, 2, 0})
      .Ints("target_treeids", {0})
      .Ints("target_nodeids", {2})
      .Ints("target_ids", {0})
      .Floats("target_weights", {1})
      .In("X", Value(Tensor::FromVector<float>({1}, {1, 1})))
      .Out("Y");
  auto c = cyc.Run();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("cycle"), std::string::npos) << c.status().message();

  // A feature beyond X's columns is reported at prepare.
  MlNode narrow("TreeEnsembleRegressor", 1);
  Trees(narrow, false)
      .Ints("target_treeids", {0, 0, 0, 1, 1})
      .Ints("target_nodeids", {1, 3, 4, 1, 2})
      .Ints("target_ids", {0, 0, 0, 0, 0})
      .Floats("target_weights", {1, 2, 3, 10, 20})
      .In("X", Value(Tensor::FromVector<float>({1, 2}, {2, 1})))
      .Out("Y");
  auto w = narrow.Run();
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("reads feature 1, but X has 1 columns"), std::string::npos)
      << w.status().message();
}

TEST(MlTree, TreeEnsembleV5SetMembershipAndSingleLeafTree) {
  const float nan = std::nanf("");
  MlNode n("TreeEnsemble", 5);
  n.Ints("nodes_featureids", {0, 1, 0})
      .TensorAttr("nodes_modes", Tensor::FromVector<uint8_t>({6, 0, 0}, {3}))
      .TensorAttr("nodes_splits", Tensor::FromVector<float>({0, 0.5f, 0}, {3}))
      .Ints("nodes_truenodeids", {0, 1, 3})
      .Ints("nodes_trueleafs", {1, 1, 1})
      .Ints("nodes_falsenodeids", {1, 2, 3})
      .Ints("nodes_falseleafs", {0, 1, 1})
      .Ints("leaf_targetids", {0, 0, 0, 0})
      .TensorAttr("leaf_weights", Tensor::FromVector<float>({1, 2, 3, 100}, {4}))
      .TensorAttr("membership_values", Tensor::FromVector<float>({1, 3, nan}, {3}))
      .Ints("tree_roots", {0, 2})
      .Int("n_targets", 1)
      .In("X", Value(Tensor::FromVector<float>({3, 0, 2, 0, 2, 1}, {3, 2})))
      .Out("Y");
  auto r = n.Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(F(r.value()[0].tensor()), (std::vector<float>{101, 102, 103}));
}

TEST(MlLinear, ClassifierRegressorScalerNormalizerBinarizer) {
  auto bin = MlNode("LinearClassifier")
                 .Floats("coefficients", {1, -1})
                 .Floats("intercepts", {0.5f})
                 .Ints("classlabels_ints", {7, 9})
                 .Str("post_transform", "LOGISTIC")
                 .In("X", Value(Tensor::FromVector<float>({1, 0, -1, 0}, {2, 2})))
                 .Out("label")
                 .Out("scores")
                 .Run();
  ASSERT_TRUE(bin.ok()) << bin.status().message();
  EXPECT_EQ(I(bin.value()[0].tensor()), (std::vector<int64_t>{9, 7}));
  EXPECT_EQ(bin.value()[1].tensor().shape(), (Shape{2, 2}));
  EXPECT_NEAR(F(bin.value()[1].tensor())[1], Sigmoid(1.5f), 1e-6);
  EXPECT_NEAR(F(bin.value()[1].tensor())[0], Sigmoid(-1.5f), 1e-6);

  auto reg = MlNode("LinearRegressor")
                 .Floats("coefficients", {1, 2, 3, 4})
                 .Floats("intercepts", {1, -1})
                 .Int("targets", 2)
                 .In("X", Value(Tensor::FromVector<float>({1, 1}, {1, 2})))
                 .Out("Y")
                 .Run();
  ASSERT_TRUE(reg.ok()) << reg.status().message();
  EXPECT_EQ(F(reg.value()[0].tensor()), (std::vector<float>{4, 6}));

  auto bad = MlNode("LinearRegressor")
                 .Floats("coefficients", {1, 2, 3})
                 .In("X", Value(Tensor::FromVector<float>({1, 1}, {1, 2})))
                 .Out("Y")
                 .Run();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("coefficients has 3 entries, expected 2"),
            std::string::npos)
      << bad.status().message();

  auto sc = MlNode("Scaler")
                .Floats("offset", {1, 2})
                .Floats("scale", {2, 0.5f})
                .In("X", Value(Tensor::FromVector<int64_t>({3, 4}, {1, 2})))
                .Out("Y")
                .Run();
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  EXPECT_EQ(F(sc.value()[0].tensor()), (std::vector<float>{4, 1}));

  for (auto [norm, want] : {std::pair<std::string, std::vector<float>>{"L2", {0.6f, 0.8f}},
                            {"L1", {3.f / 7, 4.f / 7}},
                            {"MAX", {0.75f, 1}}}) {
    auto r = MlNode("Normalizer")
                 .Str("norm", norm)
                 .In("X", Value(Tensor::FromVector<float>({3, 4}, {1, 2})))
                 .Out("Y")
                 .Run();
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_NEAR(F(r.value()[0].tensor())[0], want[0], 1e-6) << norm;
    EXPECT_NEAR(F(r.value()[0].tensor())[1], want[1], 1e-6) << norm;
  }

  auto b = MlNode("Binarizer")
               .Float("threshold", 0.5f)
               .In("X", Value(Tensor::FromVector<double>({0.2, 0.7}, {2})))
               .Out("Y")
               .Run();
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b.value()[0].tensor().data<double>()[1], 1.0);
  EXPECT_EQ(b.value()[0].tensor().data<double>()[0], 0.0);
}

TEST(MlSvm, LinearRegressorAndRbfClassifier) {
  auto reg = MlNode("SVMRegressor")
                 .Floats("coefficients", {2, 1})
                 .Floats("rho", {0.5f})
                 .In("X", Value(Tensor::FromVector<float>({1, 2}, {1, 2})))
                 .Out("Y")
                 .Run();
  ASSERT_TRUE(reg.ok()) << reg.status().message();
  EXPECT_NEAR(F(reg.value()[0].tensor())[0], 4.5f, 1e-6);

  auto clf = MlNode("SVMClassifier")
                 .Str("kernel_type", "RBF")
                 .Floats("kernel_params", {1, 0, 3})
                 .Floats("support_vectors", {0, 0, 1, 1})
                 .Ints("vectors_per_class", {1, 1})
                 .Floats("coefficients", {1, -1})
                 .Floats("rho", {0})
                 .Ints("classlabels_ints", {10, 20})
                 .In("X", Value(Tensor::FromVector<float>({0, 0, 1, 1}, {2, 2})))
                 .Out("label")
                 .Out("scores")
                 .Run();
  ASSERT_TRUE(clf.ok()) << clf.status().message();
  EXPECT_EQ(I(clf.value()[0].tensor()), (std::vector<int64_t>{10, 20}));
  const float s = 1 - std::exp(-2.f);
  EXPECT_NEAR(F(clf.value()[1].tensor())[0], -s, 1e-6);
  EXPECT_NEAR(F(clf.value()[1].tensor())[1], s, 1e-6);

  auto bad = MlNode("SVMClassifier")
                 .Floats("support_vectors", {0, 0, 1})
                 .Ints("vectors_per_class", {1, 1})
                 .Floats("coefficients", {1, -1})
                 .Floats("rho", {0})
                 .Ints("classlabels_ints", {0, 1})
                 .In("X", Value(Tensor::FromVector<float>({0, 0}, {1, 2})))
                 .Out("label")
                 .Run();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("support_vectors has 3 entries, expected 4"),
            std::string::npos)
      << bad.status().message();
}

TEST(MlEncode, OneHotLabelCategoryImputerExtractorVectorizer) {
  auto oh = MlNode("OneHotEncoder")
                .Strings("cats_strings", {"a", "b", "c"})
                .In("X", Value(Strs({"b", "z"}, {2})))
                .Out("Y")
                .Run();
  ASSERT_TRUE(oh.ok()) << oh.status().message();
  EXPECT_EQ(oh.value()[0].tensor().shape(), (Shape{2, 3}));
  EXPECT_EQ(F(oh.value()[0].tensor()), (std::vector<float>{0, 1, 0, 0, 0, 0}));
  auto strict = MlNode("OneHotEncoder")
                    .Strings("cats_strings", {"a", "b", "c"})
                    .Int("zeros", 0)
                    .In("X", Value(Strs({"b", "z"}, {2})))
                    .Out("Y")
                    .Run();
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("X[1] = 'z' is not a category"), std::string::npos)
      << strict.status().message();

  auto le = MlNode("LabelEncoder", 2)
                .Strings("keys_strings", {"a", "b"})
                .Ints("values_int64s", {1, 2})
                .Int("default_int64", -7)
                .In("X", Value(Strs({"b", "q"}, {2})))
                .Out("Y")
                .Run();
  ASSERT_TRUE(le.ok()) << le.status().message();
  EXPECT_EQ(I(le.value()[0].tensor()), (std::vector<int64_t>{2, -7}));
  auto le4 = MlNode("LabelEncoder", 4)
                 .TensorAttr("keys_tensor", Tensor::FromVector<int64_t>({1, 2}, {2}))
                 .TensorAttr("values_tensor", Tensor::FromVector<float>({0.5f, 1.5f}, {2}))
                 .TensorAttr("default_tensor", Tensor::FromVector<float>({-1}, {1}))
                 .In("X", Value(Tensor::FromVector<int64_t>({2, 5}, {2})))
                 .Out("Y")
                 .Run();
  ASSERT_TRUE(le4.ok()) << le4.status().message();
  EXPECT_EQ(F(le4.value()[0].tensor()), (std::vector<float>{1.5f, -1}));

  auto cm = MlNode("CategoryMapper")
                .Strings("cats_strings", {"x", "y"})
                .Ints("cats_int64s", {10, 20})
                .In("X", Value(Strs({"y", "w"}, {2})))
                .Out("Y")
                .Run();
  ASSERT_TRUE(cm.ok()) << cm.status().message();
  EXPECT_EQ(I(cm.value()[0].tensor()), (std::vector<int64_t>{20, -1}));

  const float nan = std::nanf("");
  auto im = MlNode("Imputer")
                .Floats("imputed_value_floats", {9, 8})
                .Float("replaced_value_float", nan)
                .In("X", Value(Tensor::FromVector<float>({nan, 1, 2, nan}, {2, 2})))
                .Out("Y")
                .Run();
  ASSERT_TRUE(im.ok()) << im.status().message();
  EXPECT_EQ(F(im.value()[0].tensor()), (std::vector<float>{9, 1, 2, 8}));

  auto afe = MlNode("ArrayFeatureExtractor")
                 .In("X", Value(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3})))
                 .In("Y", Value(Tensor::FromVector<int64_t>({2, 0}, {2})))
                 .Out("Z")
                 .Run();
  ASSERT_TRUE(afe.ok()) << afe.status().message();
  EXPECT_EQ(F(afe.value()[0].tensor()), (std::vector<float>{3, 1, 6, 4}));
  auto afe_bad = MlNode("ArrayFeatureExtractor")
                     .In("X", Value(Tensor::FromVector<float>({1, 2, 3}, {1, 3})))
                     .In("Y", Value(Tensor::FromVector<int64_t>({3}, {1})))
                     .Out("Z")
                     .Run();
  ASSERT_FALSE(afe_bad.ok());
  EXPECT_NE(afe_bad.status().message().find("Y[0] = 3, expected 0 to 2"), std::string::npos)
      << afe_bad.status().message();

  auto fv = MlNode("FeatureVectorizer")
                .Ints("inputdimensions", {2, 1})
                .In("A", Value(Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2})))
                .In("B", Value(Tensor::FromVector<int64_t>({5, 6, 7, 8}, {2, 2})))
                .Out("Y")
                .Run();
  ASSERT_TRUE(fv.ok()) << fv.status().message();
  EXPECT_EQ(F(fv.value()[0].tensor()), (std::vector<float>{1, 2, 5, 3, 4, 7}));
}

TEST(MlMap, ZipMapDictVectorizerCastMap) {
  auto zm = MlNode("ZipMap")
                .Ints("classlabels_int64s", {3, 5})
                .In("X", Value(Tensor::FromVector<float>({0.1f, 0.9f, 0.4f, 0.6f}, {2, 2})))
                .Out("Z")
                .Run();
  ASSERT_TRUE(zm.ok()) << zm.status().message();
  const Value& seq = zm.value()[0];
  ASSERT_TRUE(seq.is_map_sequence());
  ASSERT_EQ(seq.sequence().size(), 2u);
  EXPECT_EQ(I(seq.sequence_map_keys()[1]), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(F(seq.sequence()[1]), (std::vector<float>{0.4f, 0.6f}));

  auto dv = MlNode("DictVectorizer")
                .Strings("string_vocabulary", {"a", "b", "c"})
                .In("X", Value::Map(Strs({"b", "z", "a"}, {3}),
                                    Tensor::FromVector<float>({2, 9, 1}, {3})))
                .Out("Y")
                .Run();
  ASSERT_TRUE(dv.ok()) << dv.status().message();
  EXPECT_EQ(dv.value()[0].tensor().shape(), (Shape{1, 3}));
  EXPECT_EQ(F(dv.value()[0].tensor()), (std::vector<float>{1, 2, 0}));

  const Value m = Value::Map(Tensor::FromVector<int64_t>({2, 0}, {2}),
                             Tensor::FromVector<float>({1.5f, 0.5f}, {2}));
  auto dense = MlNode("CastMap").In("X", m).Out("Y").Run();
  ASSERT_TRUE(dense.ok()) << dense.status().message();
  EXPECT_EQ(F(dense.value()[0].tensor()), (std::vector<float>{0.5f, 1.5f}));
  auto sparse =
      MlNode("CastMap").Str("map_form", "SPARSE").Int("max_map", 4).In("X", m).Out("Y").Run();
  ASSERT_TRUE(sparse.ok()) << sparse.status().message();
  EXPECT_EQ(F(sparse.value()[0].tensor()), (std::vector<float>{0.5f, 0, 1.5f, 0}));

  auto not_map = MlNode("DictVectorizer")
                     .Strings("string_vocabulary", {"a"})
                     .In("X", Value(Tensor::FromVector<float>({1}, {1})))
                     .Out("Y")
                     .Run();
  ASSERT_FALSE(not_map.ok());
  EXPECT_NE(not_map.status().message().find("input X must be a map"), std::string::npos)
      << not_map.status().message();
}

}  // namespace
}  // namespace ferry::testing

// Losses, signal ops, strings and random ops (shapes only for the random ones).
#include <cmath>

#include "ops/test_util.h"

namespace ferry::testing {
namespace {

std::vector<float> Floats(const Tensor& t) {
  return {t.data<float>(), t.data<float>() + t.size()};
}

TEST(Misc, SoftmaxCrossEntropyWeightedMeanAndLogProb) {
  auto r = NodeTest("SoftmaxCrossEntropyLoss")
               .Input("x", Tensor::FromVector<float>({1, 2, 3, 1, 1, 1}, {2, 3}))
               .Input("t", Tensor::FromVector<int64_t>({2, 0}, {2}))
               .Input("w", Tensor::FromVector<float>({1, 1, 2}, {3}))
               .Output("loss")
               .Output("logp")
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  double l0 = -(3 - lse0) * 2, l1 = std::log(3.0);
  EXPECT_NEAR(r.value()[0].tensor().data<float>()[0], (l0 + l1) / 3, 1e-5);
  EXPECT_EQ(r.value()[1].tensor().shape(), (Shape{2, 3}));
  EXPECT_NEAR(r.value()[1].tensor().data<float>()[0], 1 - lse0, 1e-5);
}

TEST(Misc, NllLossIgnoreIndexAndBadTarget) {
  auto ok = NodeTest("NegativeLogLikelihoodLoss")
                .Input("x", Tensor::FromVector<float>({-1, -2, -3, -4}, {2, 2}))
                .Input("t", Tensor::FromVector<int64_t>({1, -5}, {2}))
                .Output("loss")
                .Attr("ignore_index", int64_t{-5})
                .Attr("reduction", std::string("sum"))
                .Run();
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_FLOAT_EQ(ok.value()[0].tensor().data<float>()[0], 2.f);

  auto bad = NodeTest("NegativeLogLikelihoodLoss")
                 .Input("x", Tensor::FromVector<float>({-1, -2, -3, -4}, {2, 2}))
                 .Input("t", Tensor::FromVector<int64_t>({1, 2}, {2}))
                 .Output("loss")
                 .Run();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalid);
  EXPECT_NE(bad.status().message().find("target value 2 is out of range [0, 2)"), std::string::npos)
      << bad.status().message();
}

TEST(Misc, DftRealOnesidedAndInverse) {
  auto r = NodeTest("DFT")
               .Input("x", Tensor::FromVector<float>({1, 2, 3, 4}, {1, 4, 1}))
               .Output("y")
               .Attr("onesided", int64_t{1})
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{1, 3, 2}));
  std::vector<float> want{10, 0, -2, 2, -2, 0};
  auto got = Floats(r.value()[0].tensor());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;

  auto inv = NodeTest("DFT")
                 .Input("x", Tensor::FromVector<float>({10, 0, -2, 2, -2, 0, -2, -2}, {1, 4, 2}))
                 .Output("y")
                 .Attr("inverse", int64_t{1})
                 .Run();
  ASSERT_TRUE(inv.ok()) << inv.status().message();
  got = Floats(inv.value()[0].tensor());
  want = {1, 0, 2, 0, 3, 0, 4, 0};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

TEST(Misc, HannWindowPeriodic) {
  auto r =
      NodeTest("HannWindow").Input("n", Tensor::FromVector<int64_t>({4}, {})).Output("y").Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto got = Floats(r.value()[0].tensor());
  std::vector<float> want{0, 0.5f, 1, 0.5f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
}

TEST(Misc, StringNormalizerDropsStopwordsCaseInsensitively) {
  auto m = std::make_shared<ir::Model>();
  m->ir_version = 8;
  m->opset_imports.push_back({"", 17});
  m->graph.inputs.push_back({"x", {}, ""});
  m->graph.outputs.push_back({"y", {}, ""});
  ir::Node n;
  n.op_type = "StringNormalizer";
  n.inputs = {"x"};
  n.outputs = {"y"};
  ir::Attribute stop, action;
  stop.name = "stopwords";
  stop.type = ir::AttrType::kStrings;
  stop.strings = {"monday"};
  action.name = "case_change_action";
  action.type = ir::AttrType::kString;
  action.s = "UPPER";
  n.attributes.push_back(std::move(stop));
  n.attributes.push_back(std::move(action));
  m->graph.nodes.push_back(std::move(n));
  Tensor x(DType::kString, {1, 3});
  x.data<std::string>()[0] = "Monday";
  x.data<std::string>()[1] = "tuesday";
  x.data<std::string>()[2] = "MONDAY";
  auto s = runtime::Session::Create(m);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto r = s.value()->Run({{"x", Value(x)}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{1, 1}));
  EXPECT_EQ(r.value()[0].tensor().data<std::string>()[0], "TUESDAY");
}

TEST(Misc, TfIdfSkipGramsAndDuplicatePoolEntries) {
  auto r = NodeTest("TfIdfVectorizer")
               .Input("x", Tensor::FromVector<int32_t>({1, 2, 1, 3, 2}, {5}))
               .Output("y")
               .Attr("mode", std::string("TF"))
               .Attr("min_gram_length", int64_t{1})
               .Attr("max_gram_length", int64_t{2})
               .Attr("max_skip_count", int64_t{1})
               .Attr("ngram_counts", std::vector<int64_t>{0, 3})
               .Attr("ngram_indexes", std::vector<int64_t>{0, 1, 0, 2, 3})
               .Attr("pool_int64s", std::vector<int64_t>{1, 2, 1, 1, 2, 1, 1})
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  // 1-grams: "1" x2, "2" x2 (the duplicate "1" maps to 0 too); 2-grams with skips 0 and 1:
  // (1,2) at 0-1 and 2-4, (1,1) at 0-2.
  EXPECT_EQ(Floats(r.value()[0].tensor()), (std::vector<float>{2, 2, 2, 1}));
}

TEST(Misc, RandomNormalShapeAndSeedDeterminism) {
  auto run = [] {
    return NodeTest("RandomNormal")
        .Output("y")
        .Attr("shape", std::vector<int64_t>{2, 3})
        .Attr("seed", 3.f)
        .Attr("dtype", int64_t{11})
        .Run();
  };
  auto a = run(), b = run();
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a.value()[0].tensor().dtype(), DType::kDouble);
  EXPECT_EQ(a.value()[0].tensor().shape(), (Shape{2, 3}));
  EXPECT_EQ(a.value()[0].tensor().data<double>()[4], b.value()[0].tensor().data<double>()[4]);
}

}  // namespace
}  // namespace ferry::testing

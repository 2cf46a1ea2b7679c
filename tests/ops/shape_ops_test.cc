#include "ops/test_util.h"

namespace ferry::testing {
namespace {

Tensor Ints(const std::vector<int64_t>& v) {
  return Tensor::FromVector<int64_t>(v, {static_cast<int64_t>(v.size())});
}

Tensor Iota(const Shape& shape) {
  Tensor t(DType::kFloat, shape);
  for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

std::vector<float> Floats(const Tensor& t) {
  return {t.data<float>(), t.data<float>() + t.size()};
}

TEST(ShapeOps, SliceNegativeStepsClampLikeTheSpec) {
  // data [[0..4],[5..9]]: rows from the end backwards, columns 10 (clamped to 4) down to 0 by -2.
  auto r = NodeTest("Slice")
               .Input("x", Iota({2, 5}))
               .Const("starts", Ints({-1, 10}))
               .Const("ends", Ints({-100, 0}))
               .Const("axes", Ints({0, -1}))
               .Const("steps", Ints({-1, -2}))
               .Output("y")
               .Opset(13)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Tensor& y = r.value()[0].tensor();
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(Floats(y), (std::vector<float>{9, 7, 4, 2}));
}

TEST(ShapeOps, PadReflectEdgeWrapAndCrop) {
  auto x = Tensor::FromVector<float>({1, 2, 3}, {3});
  struct Case {
    std::string mode;
    std::vector<int64_t> pads;
    std::vector<float> want;
  } cases[] = {
      {"reflect", {4, 2}, {1, 2, 3, 2, 1, 2, 3, 2, 1}},
      {"edge", {2, 1}, {1, 1, 1, 2, 3, 3}},
      {"wrap", {2, 1}, {2, 3, 1, 2, 3, 1}},
      {"constant", {-1, 2}, {2, 3, 7, 7}},
  };
  for (const Case& c : cases) {
    NodeTest t("Pad");
    t.Input("x", x).Const("pads", Ints(c.pads));
    if (c.mode == "constant") t.Const("value", Tensor::FromVector<float>({7}, {}));
    auto r = t.Output("y").Attr("mode", c.mode).Opset(19).Run();
    ASSERT_TRUE(r.ok()) << c.mode << ": " << r.status().message();
    EXPECT_EQ(Floats(r.value()[0].tensor()), c.want) << c.mode;
  }
}

TEST(ShapeOps, ConcatAndTransposeStrings) {
  auto a = Tensor::FromVector<std::string>({"a", "b"}, {2, 1});
  auto b = Tensor::FromVector<std::string>({"c", "d", "e", "f"}, {2, 2});
  auto r =
      NodeTest("Concat").Input("a", a).Input("b", b).Output("y").Attr("axis", int64_t{1}).Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Tensor& y = r.value()[0].tensor();
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(std::vector<std::string>(y.span<std::string>().begin(), y.span<std::string>().end()),
            (std::vector<std::string>{"a", "c", "d", "b", "e", "f"}));

  auto t = NodeTest("Transpose").Input("x", y).Output("y").Run();
  ASSERT_TRUE(t.ok()) << t.status().message();
  const Tensor& z = t.value()[0].tensor();
  EXPECT_EQ(z.shape(), (Shape{3, 2}));
  EXPECT_EQ(std::vector<std::string>(z.span<std::string>().begin(), z.span<std::string>().end()),
            (std::vector<std::string>{"a", "b", "c", "e", "d", "f"}));
}

TEST(ShapeOps, SplitUnevenWithNumOutputs) {
  auto r = NodeTest("Split")
               .Input("x", Iota({7}))
               .Output("a")
               .Output("b")
               .Output("c")
               .Attr("num_outputs", int64_t{3})
               .Opset(18)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Floats(r.value()[0].tensor()), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(Floats(r.value()[1].tensor()), (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(Floats(r.value()[2].tensor()), (std::vector<float>{6}));
}

TEST(ShapeOps, ReshapeZeroCopiesDimAndAllowZeroKeepsIt) {
  auto r =
      NodeTest("Reshape").Input("x", Iota({2, 3, 4})).Const("s", Ints({0, -1})).Output("y").Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{2, 12}));

  auto z = NodeTest("Reshape")
               .Input("x", Tensor(DType::kFloat, {0, 3}))
               .Const("s", Ints({3, 0}))
               .Output("y")
               .Attr("allowzero", int64_t{1})
               .Opset(14)
               .Run();
  ASSERT_TRUE(z.ok()) << z.status().message();
  EXPECT_EQ(z.value()[0].tensor().shape(), (Shape{3, 0}));
}

TEST(ShapeOps, ReshapeWithWrongElementCountIsInvalid) {
  auto r = NodeTest("Reshape").Input("x", Iota({2, 3})).Const("s", Ints({4, -1})).Output("y").Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("cannot reshape data [2,3] (6 elements)"), std::string::npos)
      << r.status().message();
}

TEST(ShapeOps, SqueezeOfNonUnitAxisIsInvalid) {
  auto r = NodeTest("Squeeze").Input("x", Iota({2, 1})).Const("axes", Ints({0})).Output("y").Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("dim is 2, expected 1"), std::string::npos)
      << r.status().message();
}

TEST(ShapeOps, DepthToSpaceModesAndBackWithSpaceToDepth) {
  auto x = Iota({1, 8, 2, 3});
  auto d = NodeTest("DepthToSpace")
               .Input("x", x)
               .Output("y")
               .Attr("blocksize", int64_t{2})
               .Attr("mode", std::string("DCR"))
               .Run();
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d.value()[0].tensor().shape(), (Shape{1, 2, 4, 6}));
  // DCR: y[0, c, 2h + i, 2w + j] = x[0, (2i + j) * 2 + c, h, w]; first row: c=0, h=0, i=0.
  EXPECT_EQ(Floats(d.value()[0].tensor()).front(), 0.f);
  EXPECT_EQ(Floats(d.value()[0].tensor())[1], 12.f);  // j=1 -> channel 2 -> 2*6
  auto s = NodeTest("SpaceToDepth")
               .Input("y", d.value()[0].tensor())
               .Output("z")
               .Attr("blocksize", int64_t{2})
               .Run();
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(Floats(s.value()[0].tensor()), Floats(x));
  // CRD: y[0, c, 2h + i, 2w + j] = x[0, c * 4 + 2i + j, h, w].
  auto c = NodeTest("DepthToSpace")
               .Input("x", x)
               .Output("y")
               .Attr("blocksize", int64_t{2})
               .Attr("mode", std::string("CRD"))
               .Run();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(Floats(c.value()[0].tensor())[1], 6.f);   // j=1 -> channel 1
  EXPECT_EQ(Floats(c.value()[0].tensor())[6], 12.f);  // i=1 -> channel 2
}

TEST(ShapeOps, SliceWithExtremeBoundsAndEmptyResult) {
  const int64_t kMax = std::numeric_limits<int64_t>::max(),
                kMin = std::numeric_limits<int64_t>::min();
  auto r = NodeTest("Slice")
               .Input("x", Iota({4}))
               .Const("starts", Ints({kMax}))
               .Const("ends", Ints({kMin}))
               .Const("axes", Ints({0}))
               .Const("steps", Ints({kMin}))
               .Output("y")
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Floats(r.value()[0].tensor()), (std::vector<float>{3}));
  auto e = NodeTest("Slice")
               .Input("x", Iota({4}))
               .Const("starts", Ints({3}))
               .Const("ends", Ints({1}))
               .Output("y")
               .Run();
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e.value()[0].tensor().shape(), (Shape{0}));
}

TEST(ShapeOps, ThreadedCopiesMatchSerial) {
  auto x = RandomTensor({3, 37, 41}, 7);
  auto run = [&](int threads) {
    auto r = NodeTest("Pad")
                 .Input("x", x)
                 .Const("pads", Ints({1, 5, -2, 0, 40, 3}))
                 .Output("y")
                 .Attr("mode", std::string("reflect"))
                 .Run(threads);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return Floats(r.value()[0].tensor());
  };
  EXPECT_EQ(run(1), run(4));
}

TEST(ShapeOps, DropoutInferenceCopiesAndMaskIsTrue) {
  auto r = NodeTest("Dropout").Input("x", Iota({4})).Output("y").Output("mask").Opset(13).Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Floats(r.value()[0].tensor()), (std::vector<float>{0, 1, 2, 3}));
  const Tensor& m = r.value()[1].tensor();
  ASSERT_EQ(m.dtype(), DType::kBool);
  for (int64_t i = 0; i < m.size(); ++i) EXPECT_TRUE(m.data<bool>()[i]);
}

}  // namespace
}  // namespace ferry::testing

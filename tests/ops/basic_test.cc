#include "ops/test_util.h"

namespace ferry::testing {
namespace {

TEST(Basic, ShapeWithStartEnd) {
  auto r = NodeTest("Shape")
               .Input("x", Tensor(DType::kFloat, {2, 3, 5, 7}))
               .Output("y")
               .Attr("start", int64_t{1})
               .Attr("end", int64_t{-1})
               .Opset(15)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{3, 5}));
}

TEST(Basic, IdentityCopiesData) {
  auto in = Tensor::FromVector<int32_t>({1, 2, 3}, {3});
  auto r = NodeTest("Identity").Input("x", in).Output("y").Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_NE(r.value()[0].tensor().raw(), in.raw());
}

TEST(Basic, UnknownOpIsUnsupported) {
  auto r = NodeTest("NoSuchOp").Input("x", Tensor(DType::kFloat, {1})).Output("y").Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("NoSuchOp"), std::string::npos);
}

}  // namespace
}  // namespace ferry::testing

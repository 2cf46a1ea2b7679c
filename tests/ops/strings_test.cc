// StringConcat, StringSplit, RegexFullMatch (opset 20): semantics the conformance cases do not
// pin down (whitespace split with maxsplit, RE2 syntax) and the errors that name the node.
#include "ops/test_util.h"

namespace ferry::testing {
namespace {

std::vector<std::string> Strings(const Tensor& t) {
  return {t.data<std::string>(), t.data<std::string>() + t.size()};
}

TEST(Strings, ConcatBroadcastsBothWays) {
  auto r = NodeTest("StringConcat")
               .Opset(20)
               .Input("x", Tensor::FromVector<std::string>({"a", "b"}, {2, 1}))
               .Input("y", Tensor::FromVector<std::string>({"1", "2", "3"}, {3}))
               .Output("z")
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{2, 3}));
  EXPECT_EQ(Strings(r.value()[0].tensor()),
            (std::vector<std::string>{"a1", "a2", "a3", "b1", "b2", "b3"}));
}

TEST(Strings, SplitWhitespaceWithMaxsplitKeepsTheRest) {
  auto r = NodeTest("StringSplit")
               .Opset(20)
               .Input("x", Tensor::FromVector<std::string>({"  a \tb  c ", "", "x"}, {3}))
               .Output("subs")
               .Output("len")
               .Attr("maxsplit", int64_t{1})
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{3, 2}));
  EXPECT_EQ(Strings(r.value()[0].tensor()),
            (std::vector<std::string>{"a", "b  c ", "", "", "x", ""}));
  const int64_t* len = r.value()[1].tensor().data<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(len, len + 3), (std::vector<int64_t>{2, 0, 1}));
}

TEST(Strings, SplitMultiByteDelimiterAndNegativeMaxsplit) {
  auto r = NodeTest("StringSplit")
               .Opset(20)
               .Input("x", Tensor::FromVector<std::string>({"a::b::::c"}, {1}))
               .Output("subs")
               .Output("len")
               .Attr("delimiter", std::string("::"))
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Strings(r.value()[0].tensor()), (std::vector<std::string>{"a", "b", "", "c"}));

  auto bad = NodeTest("StringSplit")
                 .Opset(20)
                 .Input("x", Tensor::FromVector<std::string>({"a b"}, {1}))
                 .Output("subs")
                 .Attr("maxsplit", int64_t{-1})
                 .Run();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("StringSplit 'n0'"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("maxsplit is -1"), std::string::npos);
}

TEST(Strings, RegexFullMatchUsesRe2AndRejectsBadPatterns) {
  auto r =
      NodeTest("RegexFullMatch")
          .Opset(20)
          .Input("x", Tensor::FromVector<std::string>({"ab12", "ab12x", "\xc3\xa9t\xc3\xa9"}, {3}))
          .Output("y")
          .Attr("pattern", std::string(R"((?i)AB\d+|\p{L}+)"))
          .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  const bool* y = r.value()[0].tensor().data<bool>();
  EXPECT_EQ(std::vector<bool>(y, y + 3), (std::vector<bool>{true, false, true}));

  // Backreferences are not RE2 syntax.
  auto bad = NodeTest("RegexFullMatch")
                 .Opset(20)
                 .Input("x", Tensor::FromVector<std::string>({"aa"}, {1}))
                 .Output("y")
                 .Attr("pattern", std::string(R"((a)\1)"))
                 .Run();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalid);
  EXPECT_NE(bad.status().message().find("RegexFullMatch 'n0': pattern"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace ferry::testing

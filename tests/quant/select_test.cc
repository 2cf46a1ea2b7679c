#include "quant/select.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace ferry::quant {
namespace {

// An additive model: each quantized layer adds its cost to the metric.
struct Additive {
  std::map<std::string, double> cost;
  int calls = 0;
  MeasureFn Fn() {
    return [this](const std::set<std::string>& floated) -> Result<double> {
      ++calls;
      double m = 0;
      for (const auto& [l, c] : cost)
        if (!floated.count(l)) m += c;
      return m;
    };
  }
};

TEST(SelectLayers, RanksBySoloAndFloatsMostSensitiveUntilBudget) {
  Additive a{{{"a", 0.1}, {"b", 2.0}, {"c", 0.5}, {"d", 1.0}}};
  auto s = SelectLayers({"a", "b", "c", "d"}, 0.7, a.Fn());
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->ranking.size(), 4u);
  EXPECT_EQ(s->ranking[0].layer, "b");
  EXPECT_EQ(s->ranking[1].layer, "d");
  EXPECT_EQ(s->ranking[2].layer, "c");
  EXPECT_EQ(s->ranking[3].layer, "a");
  EXPECT_DOUBLE_EQ(s->ranking[0].solo, 2.0);
  EXPECT_DOUBLE_EQ(s->metric_all, 3.6);
  ASSERT_EQ(s->steps.size(), 2u);  // b: 1.6, d: 0.6 <= 0.7
  EXPECT_EQ(s->steps[0].layer, "b");
  EXPECT_DOUBLE_EQ(s->steps[0].metric, 1.6);
  EXPECT_EQ(s->steps[1].layer, "d");
  EXPECT_NEAR(s->steps[1].metric, 0.6, 1e-12);
  EXPECT_EQ(s->kept_float, (std::vector<std::string>{"b", "d"}));
  EXPECT_TRUE(s->met);
  EXPECT_EQ(s->measurements, 4 + 1 + 2);
  EXPECT_EQ(a.calls, 7);
}

TEST(SelectLayers, LooseBudgetFloatsNothing) {
  Additive a{{{"a", 0.1}, {"b", 2.0}}};
  auto s = SelectLayers({"a", "b"}, 10, a.Fn());
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->met);
  EXPECT_TRUE(s->kept_float.empty());
  EXPECT_DOUBLE_EQ(s->metric, 2.1);
}

TEST(SelectLayers, NeverFloatsTheLastLayer) {
  Additive a{{{"a", 0.1}, {"b", 2.0}, {"c", 0.3}}};
  auto s = SelectLayers({"a", "b", "c"}, 0.0, a.Fn());
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->met);
  EXPECT_EQ(s->kept_float, (std::vector<std::string>{"b", "c"}));
  EXPECT_DOUBLE_EQ(s->metric, 0.1);
}

TEST(SelectLayers, NanRanksFirstAndErrorsPropagate) {
  MeasureFn nan_b = [](const std::set<std::string>& f) -> Result<double> {
    if (!f.count("b")) return std::nan("");
    return f.count("a") ? 0.0 : 1.0;
  };
  auto s = SelectLayers({"a", "b"}, 1.0, nan_b);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->ranking[0].layer, "b");
  EXPECT_EQ(s->kept_float, (std::vector<std::string>{"b"}));
  EXPECT_TRUE(s->met);
  MeasureFn fail = [](const std::set<std::string>&) -> Result<double> {
    return InvalidError("boom");
  };
  EXPECT_EQ(SelectLayers({"a"}, 1, fail).status().code(), StatusCode::kInvalid);
  EXPECT_EQ(SelectLayers({}, 1, fail).status().code(), StatusCode::kUsage);
}

}  // namespace
}  // namespace ferry::quant

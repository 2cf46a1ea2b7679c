// passes::Audit on ONNX Runtime contrib ops (com.microsoft): listed as such, not as a custom
// domain, and supported as is by the ferry target.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "passes/audit.h"
#include "verb_models.h"

namespace ferry::passes {
namespace {

TEST(AuditContrib, ComMicrosoftOpsAreContribOpsFerryRuns) {
  auto m = testing::ClassifierModel();
  m->opset_imports.push_back({"com.microsoft", 1});
  ir::Node gelu = testing::MakeNode("Gelu", {"y"}, {"z"});
  gelu.domain = "com.microsoft";
  m->graph.nodes.push_back(std::move(gelu));
  m->graph.outputs[0].name = "z";
  AuditOptions o;
  o.targets = {"ferry"};
  auto r = Audit(*m, "contrib.onnx", o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->custom_domains.empty());
  ASSERT_EQ(r->contrib_ops.count("com.microsoft.Gelu"), 1u);
  EXPECT_EQ(r->contrib_ops.at("com.microsoft.Gelu"), 1);
  EXPECT_EQ(r->targets[0].application, 0);
  EXPECT_EQ(r->targets[0].rewrite, 0);
  EXPECT_NE(FormatText(*r).find("ONNX Runtime contrib ops:\n  com.microsoft.Gelu x1"),
            std::string::npos)
      << FormatText(*r);
  EXPECT_EQ(nlohmann::json::parse(FormatJson(*r))["contrib_ops"]["com.microsoft.Gelu"], 1);
}

}  // namespace
}  // namespace ferry::passes

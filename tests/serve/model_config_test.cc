// serve/model_config.h: Triton's model-config vocabulary for what ferry serve runs.
#include "serve/model_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace ferry::serve {
namespace {

ModelMetadata Meta() {
  ModelMetadata m;
  m.name = "m";
  m.platform = "onnx_onnxv1";
  m.inputs = {{"x", "FP32", {-1, 3, 4}}, {"s", "BYTES", {-1}}};
  m.outputs = {{"y", "INT64", {-1, 2}}};
  return m;
}

TEST(ServeModelConfig, DataTypesInTritonNames) {
  EXPECT_EQ(TritonDataType("FP32"), "TYPE_FP32");
  EXPECT_EQ(TritonDataType("BYTES"), "TYPE_STRING");
  EXPECT_EQ(TritonDataType("BF16"), "TYPE_BF16");
  EXPECT_EQ(TritonDataType("NOPE"), "TYPE_INVALID");
  EXPECT_EQ(TritonDataTypeNumber("FP32"), 11);  // model_config.proto's enum numbers
  EXPECT_EQ(TritonDataTypeNumber("BYTES"), 13);
  EXPECT_EQ(TritonDataTypeNumber("BOOL"), 1);
  EXPECT_EQ(TritonDataTypeNumber(""), 0);
}

TEST(ServeModelConfig, BatchAxisLeftOutOnlyWhenBatching) {
  ServeConfig cfg;
  cfg.max_batch_size = 8;
  cfg.max_queue_delay_us = 500;
  cfg.preferred_batch_sizes = {4, 8};
  ModelConfigInfo c = MakeModelConfig(Meta(), "3", cfg, /*batchable=*/true, 2, true);
  EXPECT_EQ(c.max_batch_size, 8);
  EXPECT_TRUE(c.dynamic_batching);
  EXPECT_EQ(c.inputs[0].shape, (std::vector<int64_t>{3, 4}));
  EXPECT_TRUE(c.inputs[1].shape.empty());
  EXPECT_EQ(c.outputs[0].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(c.label_filename, "labels.txt");
  auto j = nlohmann::json::parse(ModelConfigJson(c));
  EXPECT_EQ(j["max_batch_size"], 8);
  EXPECT_EQ(j["input"][1]["data_type"], "TYPE_STRING");
  EXPECT_EQ(j["dynamic_batching"]["preferred_batch_size"], nlohmann::json({4, 8}));
  EXPECT_EQ(j["instance_group"][0]["count"], 2);
  // Not batchable (a fixed first axis somewhere): max_batch_size 0, full dims, no batching.
  ModelConfigInfo n = MakeModelConfig(Meta(), "3", cfg, /*batchable=*/false, 1, false);
  EXPECT_EQ(n.max_batch_size, 0);
  EXPECT_EQ(n.inputs[0].shape, (std::vector<int64_t>{-1, 3, 4}));
  auto k = nlohmann::json::parse(ModelConfigJson(n));
  EXPECT_FALSE(k.contains("dynamic_batching"));
  EXPECT_EQ(k["output"][0]["label_filename"], "");
}

TEST(ServeModelConfig, VersionPolicies) {
  ServeConfig cfg;
  cfg.policy = ServeConfig::Policy::kSpecific;
  cfg.specific = {"1", "7", "beta"};  // Triton's versions are integers: "beta" is left out
  auto j =
      nlohmann::json::parse(ModelConfigJson(MakeModelConfig(Meta(), "7", cfg, false, 1, false)));
  EXPECT_EQ(j["version_policy"], nlohmann::json::parse(R"({"specific": {"versions": [1, 7]}})"));
  cfg.policy = ServeConfig::Policy::kAll;
  j = nlohmann::json::parse(ModelConfigJson(MakeModelConfig(Meta(), "7", cfg, false, 1, false)));
  EXPECT_EQ(j["version_policy"], nlohmann::json::parse(R"({"all": {}})"));
}

}  // namespace
}  // namespace ferry::serve

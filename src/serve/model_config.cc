#include "serve/model_config.h"

#include <charconv>

#include <nlohmann/json.hpp>

namespace ferry::serve {

namespace {

// model_config.proto's DataType, in enum order (TYPE_INVALID = 0).
constexpr std::string_view kTypes[] = {"",       "BOOL", "UINT8", "UINT16", "UINT32",
                                       "UINT64", "INT8", "INT16", "INT32",  "INT64",
                                       "FP16",   "FP32", "FP64",  "BYTES",  "BF16"};

}  // namespace

int TritonDataTypeNumber(std::string_view datatype) {
  for (int i = 1; i < static_cast<int>(std::size(kTypes)); ++i)
    if (kTypes[i] == datatype) return i;
  return 0;
}

std::string TritonDataType(std::string_view datatype) {
  if (TritonDataTypeNumber(datatype) == 0) return "TYPE_INVALID";
  return datatype == "BYTES" ? "TYPE_STRING" : "TYPE_" + std::string(datatype);
}

ModelConfigInfo MakeModelConfig(const ModelMetadata& meta, const std::string& version,
                                const ServeConfig& config, bool batchable, int instances,
                                bool has_labels) {
  ModelConfigInfo c;
  c.name = meta.name;
  c.version = version;
  c.platform = meta.platform;
  c.max_batch_size = batchable ? config.max_batch_size : 0;
  c.dynamic_batching = c.max_batch_size > 0;
  auto dims = [&](std::vector<TensorMetadata> ts) {
    if (c.max_batch_size > 0)
      for (TensorMetadata& t : ts)
        if (!t.shape.empty()) t.shape.erase(t.shape.begin());
    return ts;
  };
  c.inputs = dims(meta.inputs);
  c.outputs = dims(meta.outputs);
  c.preferred_batch_sizes = config.preferred_batch_sizes;
  c.max_queue_delay_us = config.max_queue_delay_us;
  c.priority_levels = config.priority_levels;
  c.default_priority = config.default_priority;
  c.default_timeout_us = config.default_timeout_us;
  c.max_queue_size = config.max_queue_size;
  c.instances = instances;
  c.policy = config.policy;
  c.latest = config.latest;
  for (const std::string& v : config.specific) {
    int64_t n = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec == std::errc() && end == v.data() + v.size()) c.specific.push_back(n);
  }
  if (has_labels) c.label_filename = "labels.txt";
  return c;
}

std::string ModelConfigJson(const ModelConfigInfo& c) {
  using json = nlohmann::json;
  json policy;
  if (c.policy == ServeConfig::Policy::kAll)
    policy["all"] = json::object();
  else if (c.policy == ServeConfig::Policy::kSpecific)
    policy["specific"] = {{"versions", c.specific}};
  else
    policy["latest"] = {{"num_versions", c.latest}};
  json inputs = json::array(), outputs = json::array();
  for (const TensorMetadata& t : c.inputs)
    inputs.push_back({{"name", t.name},
                      {"data_type", TritonDataType(t.datatype)},
                      {"format", "FORMAT_NONE"},
                      {"dims", t.shape},
                      {"is_shape_tensor", false},
                      {"allow_ragged_batch", false},
                      {"optional", false}});
  for (const TensorMetadata& t : c.outputs)
    outputs.push_back({{"name", t.name},
                       {"data_type", TritonDataType(t.datatype)},
                       {"dims", t.shape},
                       {"label_filename", c.label_filename},
                       {"is_shape_tensor", false}});
  json out = {{"name", c.name},
              {"platform", c.platform},
              {"backend", "ferry"},
              {"version_policy", policy},
              {"max_batch_size", c.max_batch_size},
              {"input", inputs},
              {"output", outputs},
              {"instance_group",
               json::array({{{"name", c.name}, {"kind", "KIND_CPU"}, {"count", c.instances}}})},
              {"default_model_filename", "model.onnx"}};
  if (c.dynamic_batching)
    out["dynamic_batching"] = {{"preferred_batch_size", c.preferred_batch_sizes},
                               {"max_queue_delay_microseconds", c.max_queue_delay_us},
                               {"preserve_ordering", false},
                               {"priority_levels", c.priority_levels},
                               {"default_priority_level", c.default_priority},
                               {"default_queue_policy",
                                {{"timeout_action", "REJECT"},
                                 {"default_timeout_microseconds", c.default_timeout_us},
                                 {"allow_timeout_override", true},
                                 {"max_queue_size", c.max_queue_size}}}};
  return out.dump();
}

}  // namespace ferry::serve

// Triton's model configuration extension (HTTP `GET v2/models/M[/versions/V]/config`, gRPC
// ModelConfig): what `ferry serve` runs for one model version, said in Triton's model-config
// vocabulary (model_config.proto's names), so tools that read a Triton model's config (clients
// choosing batch sizes, perf_analyzer, dashboards) read Ferry's.
//
// The mapping: max_batch_size is serve.yaml's when the model batches (every input and output
// has a dynamic first axis), else 0; with max_batch_size > 0 the dims leave out the batch axis,
// as Triton writes them; -1 is a dynamic dim. Dynamic batching, the queue policy and the
// priorities are serve.yaml's; instance_group is one KIND_CPU group of `instances` executions
// sharing one session; backend "ferry", platform the metadata's ("onnx_onnxv1"). Versions that
// are not integers (Triton's versions are) are left out of a `specific` version policy.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "serve/source.h"
#include "serve/types.h"

namespace ferry::serve {

struct ModelConfigInfo {
  std::string name, version, platform;
  std::vector<TensorMetadata> inputs, outputs;  // dims as the config writes them (above)
  int64_t max_batch_size = 0;
  bool dynamic_batching = false;
  std::vector<int64_t> preferred_batch_sizes;
  uint64_t max_queue_delay_us = 0;
  uint64_t priority_levels = 1, default_priority = 0;
  uint64_t default_timeout_us = 0;
  int64_t max_queue_size = 0;
  int instances = 1;
  ServeConfig::Policy policy = ServeConfig::Policy::kLatest;
  int64_t latest = 1;
  std::vector<int64_t> specific;
  // The classification labels' file name ("" without labels), on every output: Ferry's
  // classification extension takes the labels for whichever output a request classifies.
  std::string label_filename;
};

// Fills `out` from the version's serving spec and metadata.
ModelConfigInfo MakeModelConfig(const ModelMetadata& meta, const std::string& version,
                                const ServeConfig& config, bool batchable, int instances,
                                bool has_labels);

// "FP32" -> "TYPE_FP32", "BYTES" -> "TYPE_STRING" (model_config.proto's DataType names).
std::string TritonDataType(std::string_view datatype);
// DataType's enum number (TYPE_INVALID = 0 for an unknown datatype).
int TritonDataTypeNumber(std::string_view datatype);

// The configuration as Triton's HTTP endpoint writes it (JSON, numbers as numbers).
std::string ModelConfigJson(const ModelConfigInfo& c);

}  // namespace ferry::serve

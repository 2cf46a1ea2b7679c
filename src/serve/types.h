// The inference protocol's requests and answers as the front ends (HTTP, gRPC) hand them to
// the Service and get them back: tensors already decoded into ferry::Tensor, errors as one
// of the protocol's error kinds. Plain data; no threading.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace ferry::serve {

// The protocol's error kinds. Each front end maps them: HTTP (Triton's mapping) 400 for
// kInvalidArg, 404 kNotFound, 503 kUnavailable, 501 kUnsupported, 500 kInternal,
// 401 kUnauthenticated, 403 kPermissionDenied; gRPC the status codes of the same names.
enum class ErrorKind {
  kOk = 0,
  kInvalidArg,
  kNotFound,
  kUnavailable,
  kUnsupported,
  kInternal,
  kUnauthenticated,
  kPermissionDenied,
};

struct Error {
  ErrorKind kind = ErrorKind::kOk;
  std::string message;
  bool ok() const { return kind == ErrorKind::kOk; }
  static Error Ok() { return {}; }
};

inline Error MakeError(ErrorKind kind, std::string message) {
  return {kind, std::move(message)};
}
inline Error InvalidArg(std::string message) {
  return MakeError(ErrorKind::kInvalidArg, std::move(message));
}
int HttpStatus(ErrorKind kind);

// The protocol's datatype strings ("FP32", "INT64", "BYTES", ...). BYTES is kString.
// nullopt for a name the protocol does not have or Ferry cannot hold.
std::optional<DType> DTypeFromDatatype(std::string_view datatype);
// "" for a dtype the protocol cannot carry.
std::string_view DatatypeName(DType dtype);

struct InferInput {
  std::string name;
  Tensor tensor;  // BYTES: kString, one std::string per element
};

struct RequestedOutput {
  std::string name;
  bool binary = false;         // HTTP: binary tensor extension for this output
  int64_t classification = 0;  // > 0: the top N classes as BYTES "score:index[:label]"
};

struct InferRequest {
  std::string model;
  std::string version;  // "": the version policy's choice (the newest ready version)
  std::string id;       // echoed in the response
  std::vector<InferInput> inputs;
  std::vector<RequestedOutput> outputs;  // empty: every output
  bool binary_output = false;            // HTTP: request-level binary_data_output
  uint64_t priority = 0;                 // 0: the model's default level; 1 is the highest
  uint64_t timeout_us = 0;               // 0: none; queued longer than this: kUnavailable
  // Filled by the server, not the client: per input sent as encoded images, each image's decoded
  // (height, width), so decoded boxes map back to the image the client sent.
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> raw_image_sizes;
};

struct InferOutput {
  std::string name;
  Tensor tensor;
  bool binary = false;  // as requested (front ends that care)
};

struct InferResponse {
  std::string model, version, id;
  std::vector<InferOutput> outputs;
};

struct TensorMetadata {
  std::string name;
  std::string datatype;        // protocol string
  std::vector<int64_t> shape;  // -1 for a dynamic dim
};

struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;  // ready versions, newest first
  std::string platform;               // "onnx_onnxv1"
  std::vector<TensorMetadata> inputs, outputs;
  bool verified = false;  // from a signed, checked artifact (false: --allow-unsigned plain ONNX)
};

struct ModelIndexEntry {
  std::string name, version;
  std::string state;  // READY, LOADING, UNAVAILABLE, UNLOADING
  std::string reason;
};

struct Duration {
  uint64_t count = 0, ns = 0;
};

struct BatchStat {
  int64_t batch_size = 0;
  Duration compute_input, compute_infer, compute_output;
};

struct ModelStatistics {
  std::string name, version;
  uint64_t last_inference_ms = 0;  // ms since the epoch of the last finished request
  uint64_t inference_count = 0;    // batch elements inferred
  uint64_t execution_count = 0;    // engine runs (a dynamic batch is one)
  Duration success, fail, queue, compute_input, compute_infer, compute_output;
  std::vector<BatchStat> batch_stats;
};

struct ServerMetadata {
  std::string name, version;
  std::vector<std::string> extensions;
};

}  // namespace ferry::serve

// `ferry loadgen`: a closed-loop load generator for the Open Inference Protocol (KServe v2), the
// client side of what `ferry serve` (and Triton, KServe) answer. C client threads, each with its
// own connection, each sending its next request when the previous answer came back; the
// requests of a cell draw from one shared budget of tickets and the cell stops when the tickets
// are spent or its duration is over, whichever comes first.
//
// The transport is a LoadClient: HTTP here (cpp-httplib, one keep-alive connection per client,
// the binary tensor extension both ways, as tritonclient sends it), gRPC in loadgen_grpc.h
// (ferry_serve_grpc, so this library stays free of gRPC). RunLoadgen only needs a factory.
//
// Bounded: a cell keeps one latency per ticket (--requests is capped at kMaxRequests) and
// C threads (capped at kMaxConcurrency); every connect, read and write has a timeout, so a
// cell ends at most one timeout after its duration.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "serve/types.h"

namespace ferry::serve {

inline constexpr int kMaxConcurrency = 1024;
inline constexpr uint64_t kMaxRequests = 10'000'000;

struct HostPort {
  std::string host;
  int port = 0;
  std::string ToString() const;  // "host:port" ("[::1]:port" for an IPv6 literal)
};

// "HOST:PORT" or "[IPV6]:PORT", port 1..65535; kUsage naming `flag` and the text otherwise.
Result<HostPort> ParseHostPort(std::string_view flag, std::string_view text);
// "1,4,16" -> {1, 4, 16}: each 1..kMaxConcurrency, at least one; kUsage naming `flag` otherwise.
Result<std::vector<int>> ParseConcurrencyList(std::string_view flag, std::string_view text);

// Linear interpolation between closest ranks (NumPy's default `percentile`) of `sorted`
// (ascending, not empty); q in [0, 100].
double Percentile(const std::vector<int64_t>& sorted, double q);

// One input of the repeated request, encoded once: raw little-endian row-major bytes (BOOL one
// byte per element, BYTES each element as a 4-byte little-endian length and its bytes), the
// same bytes HTTP's binary extension and gRPC's raw_input_contents carry.
struct LoadInput {
  std::string name, datatype;
  Shape shape;
  std::string raw;
};

// What every client sends, and what a good answer holds.
struct LoadRequest {
  std::string model, version;           // version "": the server's choice
  std::vector<LoadInput> inputs;        // in the model's input order
  std::vector<TensorMetadata> outputs;  // the model's outputs (metadata): names, types, shapes
};

// Raw bytes of `tensor` as LoadInput::raw describes; kUnsupported for a dtype the protocol
// cannot carry.
Result<LoadInput> EncodeLoadInput(const std::string& name, const Tensor& tensor);

// Checks one answer's outputs against the expected ones: every expected output present once,
// same datatype, a shape that fits the metadata (-1 matches any dim), raw size = elements x
// element size (BYTES: at least 4 bytes per element). Returns "" when it fits, else what is
// wrong ("output 'y': datatype INT64, expected FP32").
struct SeenOutput {
  std::string name, datatype;
  Shape shape;
  uint64_t raw_bytes = 0;
};
std::string CheckOutputs(const std::vector<SeenOutput>& seen,
                         const std::vector<TensorMetadata>& expected);

// HTTP codec, client side. The request: JSON header
// {"inputs":[{"name","shape","datatype","parameters":{"binary_data_size":N}}],
//  "parameters":{"binary_data_output":true}} followed by the inputs' raw bytes;
// *header_length gets the JSON's length (the Inference-Header-Content-Length value).
std::string EncodeHttpInferRequest(const LoadRequest& request, size_t* header_length);
// Reads an infer answer body (header_length "" when the server sent none: all JSON) into the
// outputs it declares. Returns "" or what is malformed.
std::string ParseHttpInferResponse(const std::string& header_length, const std::string& body,
                                   std::vector<SeenOutput>* outputs);
// Model metadata JSON (GET v2/models/M[/versions/V]) -> ModelMetadata; "" or what is wrong.
std::string ParseHttpModelMetadata(const std::string& body, ModelMetadata* out);

// One client's connection. Not thread-safe: each client thread owns one.
class LoadClient {
 public:
  virtual ~LoadClient() = default;
  // The model's metadata; kInvalid naming the target and the server's answer (unreachable,
  // unknown model or version, a malformed answer).
  virtual Status Metadata(const std::string& model, const std::string& version,
                          ModelMetadata* out) = 0;
  // Encodes `request` once; every Infer sends it.
  virtual void SetRequest(const LoadRequest& request) = 0;
  // Sends the request and waits for its answer (at most the timeout). True when the answer is
  // a success: HTTP 200 / gRPC OK whose outputs pass CheckOutputs. The outputs are checked in
  // full until one answer passed, and again whenever an answer's size differs from that one's
  // (an answer of the same size as a checked one is taken as good). False with *error set
  // (one line) otherwise.
  virtual bool Infer(std::string* error) = 0;
};

// Makes a connected-on-demand client for one thread; kInvalid when it cannot (gRPC: the
// channel did not connect within the connect timeout).
using LoadClientFactory = std::function<Result<std::unique_ptr<LoadClient>>()>;

struct LoadTimeouts {
  int connect_s = 5;   // TCP connect (gRPC: channel ready)
  int request_s = 30;  // HTTP read and write of one request; gRPC deadline of one call
};

// One keep-alive cpp-httplib connection per client, no Content-Type, no Accept-Encoding.
LoadClientFactory HttpLoadClientFactory(const HostPort& target, const LoadTimeouts& timeouts);

struct LoadgenOptions {
  std::string protocol;  // "http" or "grpc": for the report only
  HostPort target;
  std::string model, version;
  // ONNX test-data layout: input_0.pb .. input_{N-1}.pb, matched by position to the model's N
  // metadata inputs (the file's own tensor name is not used). "": generated from the metadata
  // (dynamic dims 1; floats uniform in [0, 1), integers in [0, 10), bools 0/1; seeded).
  std::string input_dir;
  uint64_t seed = 0;
  std::vector<int> concurrency = {1};  // one cell per value, in this order
  uint64_t requests = 1000;            // tickets per cell, 1..kMaxRequests
  double duration_s = 60;              // cap per cell (> 0)
  int warmup = 2;                      // untimed requests per client before the cell starts
};

struct LoadCell {
  int concurrency = 0;
  uint64_t requests = 0;   // the ticket budget
  uint64_t completed = 0;  // timed answers: ok + errors
  uint64_t ok = 0, errors = 0;
  uint64_t warmup_errors = 0;
  std::string first_error;  // of the cell's first failed request (warm-up or timed); "" none
  std::string stopped_by;   // "requests" or "duration"
  double wall_s = 0;        // start -> last answer
  double throughput = 0;    // ok / wall_s
  // Latency of the successful timed requests, µs; 0 when there were none.
  double p50_us = 0, p90_us = 0, p99_us = 0, max_us = 0, mean_us = 0;
  double cpu_s = 0;               // this process's user + system CPU during the timed part
  double cpu_us_per_request = 0;  // cpu_s / completed
};

struct LoadReport {
  std::string protocol, target, model, version;
  std::string input_source;       // the directory, or "generated (seed N)"
  std::vector<LoadInput> inputs;  // the renderers show their raw size, not the bytes
  std::vector<TensorMetadata> outputs;
  int warmup = 0;
  double duration_s = 0;
  std::vector<LoadCell> cells;
  // Answers that failed, warm-up included, over all cells (the exit code's "check failed").
  uint64_t failed() const;
};

// Fetches the metadata (one client), builds the request, runs one cell per concurrency value.
// kUsage for bad options, kInvalid when the server cannot be reached, does not know the model,
// or the input files do not fit the metadata; kUnsupported for a BYTES input to generate.
// Failed requests are counted in the cells, not returned as an error.
Result<LoadReport> RunLoadgen(const LoadgenOptions& options, const LoadClientFactory& factory);

std::string FormatText(const LoadReport& report);
std::string FormatJson(const LoadReport& report);

}  // namespace ferry::serve

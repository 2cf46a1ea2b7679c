// The gRPC front end: inference.GRPCInferenceService (the Open Inference Protocol's service
// with Triton's repository and statistics RPCs) over a Service. The .proto is Ferry's own,
// written from the protocol's published field numbers (serve/proto/inference.proto).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "serve/service.h"

namespace ferry::serve {

struct GrpcOptions {
  std::string address = "0.0.0.0:8001";  // host:port; port 0 picks a free one
  // tritonclient sets its send/receive limits to INT32_MAX; the server's 4 MB default would
  // refuse its large tensors.
  int max_message_bytes = 2147483647;
};

class GrpcServer {
 public:
  virtual ~GrpcServer() = default;
  virtual int port() const = 0;  // the bound port
  // Stops accepting; calls in flight finish (up to deadline_ms), then returns.
  virtual void Shutdown(int deadline_ms) = 0;
};

// Binds and starts serving on its own threads. Errors: kInvalid when the address cannot be
// bound (naming it).
Result<std::unique_ptr<GrpcServer>> StartGrpcServer(Service* service, const GrpcOptions& options);

}  // namespace ferry::serve

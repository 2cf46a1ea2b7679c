// The load generator's gRPC transport (serve/loadgen.h's LoadClient over
// inference.GRPCInferenceService): ModelMetadata, and ModelInfer with raw_input_contents. In
// ferry_serve_grpc, so ferry_serve itself does not link gRPC.
#pragma once

#include "serve/loadgen.h"

namespace ferry::serve {

// kPerClient: every client its own channel on its own subchannel pool (one TCP connection per
// client, as C tritonclient processes have); kShared: one channel (one HTTP/2 connection) for
// every client of the process.
enum class GrpcChannels { kPerClient, kShared };

// Each client made waits for its channel to be ready (at most timeouts.connect_s; kInvalid
// naming the target otherwise); every call has a deadline of timeouts.request_s. Message
// sizes are not limited on the client side.
LoadClientFactory GrpcLoadClientFactory(const HostPort& target, const LoadTimeouts& timeouts,
                                        GrpcChannels channels);

}  // namespace ferry::serve

// The HTTP/REST infer codec: request bodies (JSON tensors, or a JSON header followed by the
// binary tensor extension's raw bytes) to InferRequest, InferResponse to bodies. Bytes in,
// bytes out: no server, so it is unit-tested (tests/serve/codec_test.cc) and fuzzed
// (fuzz/fuzz_http_request.cc) alone. Every limit is checked before anything is allocated.
#pragma once

#include <cstdint>
#include <string>

#include "serve/types.h"

namespace ferry::serve {

struct RequestLimits {
  uint64_t max_body_bytes = uint64_t{1} << 31;   // whole request body
  uint64_t max_elements = uint64_t{1} << 30;     // per input tensor
  uint64_t max_total_bytes = uint64_t{1} << 31;  // all decoded inputs together
};

// Decodes an infer request body. `header_length`: the Inference-Header-Content-Length header
// ("" when absent: the whole body is JSON). kInvalidArg naming the input and what is wrong:
// malformed JSON, an unknown datatype, a shape that is not a list of non-negative integers,
// data whose count or types do not match the shape, binary sizes that do not add up to the
// body, a tensor over the limits (refused before allocating).
Error ParseInferRequest(const std::string& header_length, const std::string& body,
                        const RequestLimits& limits, InferRequest* request);

// Encodes a response: JSON, or JSON followed by the binary outputs (then *header_length is
// the JSON's length, else 0).
void EncodeInferResponse(const InferResponse& response, std::string* body, size_t* header_length);

// {"error": message}
std::string ErrorJson(const std::string& message);

}  // namespace ferry::serve

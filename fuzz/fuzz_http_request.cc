// ferry serve's HTTP infer codec: bytes -> serve::ParseInferRequest -> EncodeInferResponse.
// Input layout: the Inference-Header-Content-Length header value up to the first '\n' (empty:
// none), then the body. Properties: never a crash, an escaped exception, a hang or an
// allocation beyond the limits; a refusal is kInvalidArg with a message; an accepted request's
// tensors hold exactly the elements their shapes say, and encode (JSON and binary) without
// failing, the binary part exactly the tensors' bytes.
#include <string>

#include "fuzz_common.h"
#include "serve/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ferry;
  const std::string input(reinterpret_cast<const char*>(data), size);
  size_t nl = input.find('\n');
  std::string header = nl == std::string::npos ? "" : input.substr(0, nl);
  std::string body = nl == std::string::npos ? input : input.substr(nl + 1);
  serve::RequestLimits limits;
  limits.max_body_bytes = 1 << 20;
  limits.max_elements = 1 << 20;
  limits.max_total_bytes = 16 << 20;
  serve::InferRequest request;
  serve::Error e = serve::ParseInferRequest(header, body, limits, &request);
  if (!e.ok()) {
    if (e.kind != serve::ErrorKind::kInvalidArg || e.message.empty())
      fuzz::Fail("a refusal that is not kInvalidArg with a message: " + e.message);
    return 0;
  }
  serve::InferResponse response;
  response.model = "m";
  response.id = request.id;
  size_t expected_binary = 0;
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const auto& t = request.inputs[i].tensor;
    if (NumElements(t.shape()) != t.size()) fuzz::Fail("a tensor whose size is not its shape's");
    serve::InferOutput o;
    o.name = request.inputs[i].name;
    o.tensor = t;
    o.binary = i % 2 == 1;
    if (o.binary) {
      if (t.dtype() == DType::kString) {
        for (const auto& s : t.span<std::string>()) expected_binary += 4 + s.size();
      } else {
        expected_binary += t.nbytes();
      }
    }
    response.outputs.push_back(std::move(o));
  }
  std::string out;
  size_t header_length = 0;
  serve::EncodeInferResponse(response, &out, &header_length);
  if (expected_binary > 0 && out.size() - header_length != expected_binary)
    fuzz::Fail("the binary part of the response is not the tensors' bytes");
  return 0;
}

// TensorProto reader (test-data .pb files): bytes -> ir::ParseTensorProto; a tensor it accepts
// must survive SerializeTensorProto -> ParseTensorProto with the same dtype, shape and elements.
#include <cstring>
#include <string>

#include "fuzz_common.h"
#include "ir/onnx_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ferry;
  auto t = ir::ParseTensorProto(std::string(reinterpret_cast<const char*>(data), size), "fuzz.pb");
  if (!t.ok()) return 0;
  const Tensor& a = t.value();
  auto b = ir::ParseTensorProto(ir::SerializeTensorProto(a, "x"), "round trip");
  if (!b.ok())
    fuzz::Fail("SerializeTensorProto wrote bytes ParseTensorProto refuses: " +
               b.status().message());
  if (b->dtype() != a.dtype() || b->shape() != a.shape())
    fuzz::Fail("TensorProto round trip changed " + ShapeToString(a.shape()) + " into " +
               ShapeToString(b->shape()));
  if (a.dtype() == DType::kString) {
    for (int64_t i = 0; i < a.size(); ++i)
      if (a.data<std::string>()[i] != b->data<std::string>()[i])
        fuzz::Fail("TensorProto round trip changed string " + std::to_string(i));
  } else if (a.nbytes() > 0 && std::memcmp(a.raw(), b->raw(), a.nbytes()) != 0) {
    fuzz::Fail("TensorProto round trip changed the elements");
  }
  return 0;
}

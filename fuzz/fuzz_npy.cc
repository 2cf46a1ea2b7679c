// .npy reader: bytes -> ParseNpy; a tensor it accepts must survive SerializeNpy -> ParseNpy
// with the same dtype, shape and element bytes.
#include <cstring>
#include <string>

#include "core/npy.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ferry;
  auto t = ParseNpy(std::string(reinterpret_cast<const char*>(data), size), "fuzz.npy");
  if (!t.ok()) return 0;
  const Tensor& a = t.value();
  auto b = ParseNpy(SerializeNpy(a), "round trip");
  if (!b.ok()) fuzz::Fail("SerializeNpy wrote a file ParseNpy refuses: " + b.status().message());
  if (b->dtype() != a.dtype() || b->shape() != a.shape())
    fuzz::Fail("npy round trip changed " + ShapeToString(a.shape()) + " into " +
               ShapeToString(b->shape()));
  if (a.dtype() == DType::kString) {
    for (int64_t i = 0; i < a.size(); ++i)
      if (a.data<std::string>()[i] != b->data<std::string>()[i])
        fuzz::Fail("npy round trip changed string " + std::to_string(i));
  } else if (a.nbytes() > 0 && std::memcmp(a.raw(), b->raw(), a.nbytes()) != 0) {
    fuzz::Fail("npy round trip changed the elements");
  }
  return 0;
}

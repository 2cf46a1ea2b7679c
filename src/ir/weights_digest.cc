#include "ir/weights_digest.h"

#include "core/sha256.h"

namespace ferry::ir {

WeightsDigest DigestWeights(const ir::Graph& g) {
  WeightsDigest d;
  Sha256 sha;
  for (const auto& init : g.initializers) {
    d.parameters += init.tensor.size();
    if (init.tensor.dtype() == DType::kString) {
      for (int64_t i = 0; i < init.tensor.size(); ++i) {
        const std::string& s = init.tensor.data<std::string>()[i];
        sha.Update(s.data(), s.size());
        d.bytes += static_cast<int64_t>(s.size());
      }
    } else {
      sha.Update(init.tensor.raw(), init.tensor.nbytes());
      d.bytes += static_cast<int64_t>(init.tensor.nbytes());
    }
  }
  d.sha256 = sha.HexDigest();
  return d;
}

}  // namespace ferry::ir

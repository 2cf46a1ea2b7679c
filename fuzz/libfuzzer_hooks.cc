// libFuzzer's custom mutator hooks for the targets that read protobuf bytes (linked into the
// libFuzzer build only; the regression runner never mutates). Most mutations are structure-
// aware (onnx_mutator.h); one in eight, and every input that does not parse, gets libFuzzer's
// byte mutations (bit flips, inserted bytes, dictionary words), which reach the parsers.
// FERRY_FUZZ_TENSORPROTO selects the TensorProto mutator instead of the model mutator.
#include <cstddef>
#include <cstdint>

#include "onnx_mutator.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  if (seed % 8 != 0) {
#ifdef FERRY_FUZZ_TENSORPROTO
    size_t n = ferry::fuzz::MutateTensorProto(data, size, max_size, seed);
#else
    size_t n = ferry::fuzz::MutateModel(data, size, max_size, seed);
#endif
    if (n > 0) return n;
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

#ifndef FERRY_FUZZ_TENSORPROTO
extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* data1, size_t size1,
                                            const uint8_t* data2, size_t size2, uint8_t* out,
                                            size_t max_out_size, unsigned int seed) {
  return ferry::fuzz::CrossOverModels(data1, size1, data2, size2, out, max_out_size, seed);
}
#endif

// A structure-aware mutator for ONNX models: parses the bytes as a ModelProto, changes one or
// a few fields the way a broken exporter or a hostile file would (attribute values and types,
// dims including negative and 2^40, dtypes, initializer sizes against their data, node wiring,
// cycles, duplicated names, opsets, domains, external-data paths, model-local functions,
// If/Loop subgraphs) and serializes it again. The fuzz targets that read models hook it in
// through libFuzzer's LLVMFuzzerCustomMutator (libfuzzer_hooks.cc); bytes that do not parse are
// left to libFuzzer's byte mutations.
//
// To add a mutation: 1. write a `bool MutateX(Ctx&)` in onnx_mutator.cc that returns whether it
// changed anything, 2. add it to kMutations there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ferry::fuzz {

// Mutates the serialized ModelProto data[0, size) in place into at most max_size bytes and
// returns the new size. Returns 0, leaving data unchanged, when the bytes do not parse as a
// ModelProto or no mutation fitting max_size was found (the caller then mutates bytes).
// Deterministic for a given (data, seed).
size_t MutateModel(uint8_t* data, size_t size, size_t max_size, unsigned int seed);

// Combines two serialized models: a copy of `a` receiving nodes (with the initializers they
// read), a subgraph or a function from `b`. Writes at most max_out bytes to `out` and returns
// the size, or 0 when either does not parse or the result does not fit.
size_t CrossOverModels(const uint8_t* a, size_t a_size, const uint8_t* b, size_t b_size,
                       uint8_t* out, size_t max_out, unsigned int seed);

// The tensor mutations alone, on a serialized TensorProto (the .pb reader's target); 0 when
// the bytes do not parse as one or the result does not fit.
size_t MutateTensorProto(uint8_t* data, size_t size, size_t max_size, unsigned int seed);

// The same on strings, for tests and tools: "" when `bytes` is not a ModelProto.
std::string MutateModelBytes(const std::string& bytes, unsigned int seed);

}  // namespace ferry::fuzz

// Reading tensors and values from files: .npy and ONNX TensorProto .pb (the inputs of `ferry run`,
// data sets of verify, calibrate, quantize and bench).
#pragma once

#include <string>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"

namespace ferry::ir {

// Reads FILE for a graph input of `type`: .npy (by magic) or .pb (TensorProto, or
// SequenceProto/OptionalProto for sequence/optional inputs). A uint16 tensor given for a
// bfloat16 input is taken as the raw bfloat16 bits (numpy has no bfloat16).
Result<Value> ReadInputFile(const std::string& path, const ir::TypeInfo& type);
// Copies raw bytes between tensors of equal byte size (bfloat16 <-> uint16 bits).
void CopyBits(const Tensor& from, Tensor* to);
// "<name>" with every char other than [A-Za-z0-9._-] replaced by '_'.
std::string SanitizeFileName(const std::string& name);

}  // namespace ferry::ir

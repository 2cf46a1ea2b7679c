// ONNX import and export: ModelProto <-> ir::Model, TensorProto <-> Tensor, and the .pb
// test-data files (TensorProto, SequenceProto, OptionalProto). libonnx/protobuf types stay
// inside this layer's .cc files; callers see only Ferry types.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"

namespace ferry::ir {

// Loads an .onnx file. External data paths resolve against the model's folder; a path that
// leaves that folder is refused (kInvalid). Errors: kInvalid for unreadable/truncated/garbage
// bytes, kUnsupported for element types Ferry does not hold. Initializers' raw data of 64 KiB
// and more is read from the file straight into the tensors (the file is never resident beside
// them).
Result<std::unique_ptr<Model>> LoadModel(const std::string& path);
// Tests: how many raw_data payloads the calling thread's last LoadModel read apart.
int LargeRawReadForTesting();
// Parses model bytes; `base_dir` resolves external data ("" refuses external data).
Result<std::unique_ptr<Model>> ParseModel(const std::string& bytes, const std::string& base_dir,
                                          const std::string& what);

// Serialises deterministically (same model -> same bytes). Tensors are written inline.
std::string SerializeModel(const Model& model);
// Writes atomically (temp file + rename). When the initializers hold more than protobuf's
// 2 GiB limit allows, tensors of 1 KiB or more go to `<file name>.data` beside the model (ONNX
// external data, 64-byte aligned offsets), written before the model file.
Status SaveModel(const Model& model, const std::string& path);
// The same with an explicit threshold: initializer bytes above which tensors go external.
Status SaveModel(const Model& model, const std::string& path, size_t external_threshold);

// A serialized TensorProto (a test-data `input_0.pb`).
Result<Tensor> ParseTensorProto(const std::string& bytes, const std::string& what);
Result<Tensor> ReadTensorPb(const std::string& path);
// A test-data .pb holding a value of `type`: TensorProto for tensors, SequenceProto for
// sequences, OptionalProto for optionals (a TensorProto is accepted for an optional tensor).
Result<Value> ReadValuePb(const std::string& path, const TypeInfo& type);
// The TensorProto's `name` field of a .pb file ("" if none or unreadable).
std::string TensorPbName(const std::string& path);
std::string SerializeTensorProto(const Tensor& t, const std::string& name);

}  // namespace ferry::ir

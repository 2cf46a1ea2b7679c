// libonnx's shape inference and version converter trust their input: a node that does not match
// its operator schema (input or output count, attribute types, a required attribute missing) can
// crash them (SIGSEGV in MaxUnpool's or Scan's inference, in the converter's graph import: found
// by fuzz/fuzz_passes). Ferry checks those nodes against the same schemas first.
#pragma once

#include <onnx/onnx_pb.h>

#include "core/status.h"

namespace ferry::passes {

// kInvalid naming the first node (main graph, subgraphs, model-local functions) whose schema
// libonnx knows at the opset it is imported at and that does not verify against it (or reads
// a value of a type it does not take), a read of a value not produced before it (libonnx's
// inference functions dereference the type of every input: nodes must be in topological
// order), or a graph nested deeper than 32; nodes of unknown ops or domains are not checked
// against a schema (libonnx skips them too).
Status VerifyNodesForLibOnnx(const onnx::ModelProto& proto);
// The whole model through libonnx's checker (what its version converter assumes of its input:
// typed graph inputs and outputs, opsets, topological order), plus VerifyNodesForLibOnnx;
// kInvalid with the checker's message. The IR version is read as at most libonnx's own.
Status CheckModelForLibOnnx(const onnx::ModelProto& proto);

}  // namespace ferry::passes

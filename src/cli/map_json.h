// Maps and sequences of maps (ai.onnx.ml values: DictVectorizer / CastMap inputs, ZipMap
// outputs) as JSON files for `ferry run`:
//   a map               {"key": value, ...}            (int64 keys as decimal strings)
//   a sequence of maps  [{"key": value, ...}, ...]
// Values are JSON numbers (floats written with the digits that round-trip) or strings.
#pragma once

#include <string>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"

namespace ferry::cli {

// Reads a JSON map for a graph input of map type `type` (its key and value types say how to
// read keys and values). kInvalid naming the file on bad JSON, a key that is not a decimal
// int64 for int64 keys, or a value of the wrong kind.
Result<Value> ReadMapJson(const std::string& path, const ir::TypeInfo& type);
// The JSON text of a map or a sequence of maps (precondition: v.is_map() || v.is_map_sequence()).
std::string MapValueToJson(const Value& v);

}  // namespace ferry::cli

// Ferry's IR: a Model owns a Graph; nodes refer to values by name, as ONNX does.
// Subgraphs (If/Loop/Scan bodies) are owned by their node's attributes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ferry::ir {

class Graph;

// A dimension: a known size, a symbolic name ("batch"), or unknown (neither).
struct Dim {
  std::optional<int64_t> value;
  std::string symbol;
  bool known() const { return value.has_value(); }
  std::string ToString() const { return value ? std::to_string(*value) : (symbol.empty() ? "?" : symbol); }
};

// The type of a graph input/output/value: a tensor, a sequence of X, an optional X or a map.
struct TypeInfo {
  enum class Kind { kUnknown, kTensor, kSequence, kOptional, kMap };
  Kind kind = Kind::kUnknown;
  DType elem_type = DType::kUndefined;      // for kTensor
  std::optional<std::vector<Dim>> shape;    // for kTensor; nullopt = rank unknown
  std::shared_ptr<TypeInfo> inner;          // for kSequence / kOptional; kMap: the value type
  DType key_type = DType::kUndefined;       // for kMap (int64 or string)
  int raw_elem_code = 0;                    // ONNX elem code as read (for unsupported types)
  std::string ToString() const;
};

struct ValueInfo {
  std::string name;
  TypeInfo type;
  std::string doc_string;
};

enum class AttrType { kUndefined = 0, kFloat, kInt, kString, kTensor, kGraph, kFloats, kInts, kStrings, kTensors, kGraphs, kSparseTensor, kTypeProto };

struct Attribute {
  std::string name;
  AttrType type = AttrType::kUndefined;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::unique_ptr<Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::unique_ptr<Graph>> graphs;
  TypeInfo tp;
  std::string ref_attr_name;  // set inside function bodies
  std::string doc_string;
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" is the default ONNX domain ("ai.onnx" is normalised to "")
  std::vector<std::string> inputs;   // "" marks an omitted optional input
  std::vector<std::string> outputs;  // "" marks an omitted optional output
  std::vector<Attribute> attributes;
  std::string doc_string;

  const Attribute* attr(std::string_view name) const;
  // Typed attribute getters with defaults.
  int64_t attr_int(std::string_view name, int64_t def) const;
  float attr_float(std::string_view name, float def) const;
  std::string attr_string(std::string_view name, const std::string& def) const;
  std::vector<int64_t> attr_ints(std::string_view name) const;  // empty if absent
  std::vector<float> attr_floats(std::string_view name) const;
  std::vector<std::string> attr_strings(std::string_view name) const;
  // "Conv 'layer1.0.conv1'" — how error messages name a node.
  std::string Describe() const;
};

struct Initializer {
  std::string name;
  Tensor tensor;
  std::string doc_string;
};

class Graph {
 public:
  std::string name;
  std::string doc_string;
  std::vector<Node> nodes;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  std::vector<ValueInfo> value_info;
  std::vector<Initializer> initializers;  // in file order (sparse ones densified, appended)

  const Initializer* FindInitializer(std::string_view name) const;
  bool IsInitializer(std::string_view name) const { return FindInitializer(name) != nullptr; }
  // Graph inputs that are not initializers: what a caller must feed.
  std::vector<const ValueInfo*> RealInputs() const;
};

struct OpsetImport {
  std::string domain;  // "" for the default domain
  int64_t version = 0;
};

class Model {
 public:
  int64_t ir_version = 0;
  std::vector<OpsetImport> opset_imports;
  std::string producer_name, producer_version, domain, doc_string;
  int64_t model_version = 0;
  std::vector<std::pair<std::string, std::string>> metadata;
  // Model-local functions, kept as serialized FunctionProto bytes for export.
  std::vector<std::string> functions_serialized;
  std::vector<std::string> function_names;  // "domain:name" of each local function
  Graph graph;

  // Opset version imported for `domain` ("" / "ai.onnx" default), or nullopt.
  std::optional<int64_t> OpsetFor(std::string_view domain) const;
};

}  // namespace ferry::ir

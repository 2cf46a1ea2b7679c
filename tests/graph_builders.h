// Small IR builders shared by the gtests that assemble graphs by hand.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace ferry::testing {

// A node named after its first output (or its op when it has none).
inline ir::Node MakeNode(const std::string& op, std::vector<std::string> in,
                         std::vector<std::string> out) {
  ir::Node n;
  n.op_type = op;
  n.name = out.empty() ? op : out[0];
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  return n;
}

// A float32 tensor value of the given dims (known or symbolic).
inline ir::ValueInfo FloatValue(const std::string& name, std::vector<ir::Dim> dims) {
  ir::ValueInfo v;
  v.name = name;
  v.type.kind = ir::TypeInfo::Kind::kTensor;
  v.type.elem_type = DType::kFloat;
  v.type.shape = std::move(dims);
  return v;
}

// The same with every dim known.
inline ir::ValueInfo FloatValue(const std::string& name, const std::vector<int64_t>& dims) {
  std::vector<ir::Dim> d;
  for (int64_t x : dims) d.push_back(ir::Dim{x, ""});
  return FloatValue(name, std::move(d));
}

}  // namespace ferry::testing

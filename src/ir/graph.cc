#include "ir/graph.h"

#include <fmt/format.h>

namespace ferry::ir {

std::string TypeInfo::ToString() const {
  switch (kind) {
    case Kind::kTensor: {
      std::string s =
          std::string(elem_type == DType::kUndefined ? fmt::format("dtype#{}", raw_elem_code)
                                                     : std::string(DTypeName(elem_type)));
      if (!shape) return s + "[?]";
      s += "[";
      for (size_t i = 0; i < shape->size(); ++i) s += (i ? "," : "") + (*shape)[i].ToString();
      return s + "]";
    }
    case Kind::kSequence:
      return "sequence<" + (inner ? inner->ToString() : "?") + ">";
    case Kind::kOptional:
      return "optional<" + (inner ? inner->ToString() : "?") + ">";
    case Kind::kMap:
      return "map<" +
             std::string(key_type == DType::kUndefined ? "?" : DTypeName(key_type)) + "," +
             (inner ? inner->ToString() : "?") + ">";
    default:
      return "?";
  }
}

const Attribute* Node::attr(std::string_view n) const {
  for (const auto& a : attributes)
    if (a.name == n) return &a;
  return nullptr;
}
int64_t Node::attr_int(std::string_view n, int64_t def) const {
  const Attribute* a = attr(n);
  return a ? a->i : def;
}
float Node::attr_float(std::string_view n, float def) const {
  const Attribute* a = attr(n);
  return a ? a->f : def;
}
std::string Node::attr_string(std::string_view n, const std::string& def) const {
  const Attribute* a = attr(n);
  return a ? a->s : def;
}
std::vector<int64_t> Node::attr_ints(std::string_view n) const {
  const Attribute* a = attr(n);
  return a ? a->ints : std::vector<int64_t>{};
}
std::vector<float> Node::attr_floats(std::string_view n) const {
  const Attribute* a = attr(n);
  return a ? a->floats : std::vector<float>{};
}
std::vector<std::string> Node::attr_strings(std::string_view n) const {
  const Attribute* a = attr(n);
  return a ? a->strings : std::vector<std::string>{};
}
std::string Node::Describe() const {
  std::string op = domain.empty() ? op_type : domain + "." + op_type;
  return fmt::format("{} '{}'", op,
                     name.empty() ? (outputs.empty() ? std::string("?") : outputs[0]) : name);
}

const Initializer* Graph::FindInitializer(std::string_view n) const {
  for (const auto& i : initializers)
    if (i.name == n) return &i;
  return nullptr;
}

std::vector<const ValueInfo*> Graph::RealInputs() const {
  std::vector<const ValueInfo*> out;
  for (const auto& vi : inputs)
    if (!IsInitializer(vi.name)) out.push_back(&vi);
  return out;
}

std::optional<int64_t> Model::OpsetFor(std::string_view d) const {
  if (d == "ai.onnx") d = "";
  for (const auto& o : opset_imports)
    if (o.domain == d || (d.empty() && o.domain == "ai.onnx")) return o.version;
  return std::nullopt;
}

}  // namespace ferry::ir

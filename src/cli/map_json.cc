#include "cli/map_json.h"

#include <cerrno>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "core/npy.h"

namespace ferry::cli {

namespace {

using Json = nlohmann::ordered_json;

Json MapToJson(const Tensor& keys, const Tensor& values) {
  Json o = Json::object();
  for (int64_t i = 0; i < keys.size(); ++i) {
    const std::string k = keys.dtype() == DType::kString ? keys.data<std::string>()[i]
                                                         : std::to_string(keys.GetAsInt64(i));
    switch (values.dtype()) {
      case DType::kString:
        o[k] = values.data<std::string>()[i];
        break;
      case DType::kFloat:
        o[k] = static_cast<double>(values.data<float>()[i]);
        break;
      case DType::kDouble:
        o[k] = values.data<double>()[i];
        break;
      default:
        o[k] = values.GetAsInt64(i);
    }
  }
  return o;
}

}  // namespace

std::string MapValueToJson(const Value& v) {
  if (v.is_map()) return MapToJson(v.map_keys(), v.tensor()).dump(1) + "\n";
  Json a = Json::array();
  for (size_t i = 0; i < v.sequence().size(); ++i)
    a.push_back(MapToJson(v.sequence_map_keys()[i], v.sequence()[i]));
  return a.dump(1) + "\n";
}

Result<Value> ReadMapJson(const std::string& path, const ir::TypeInfo& type) {
  if (type.kind != ir::TypeInfo::Kind::kMap)
    return InvalidError("'{}': a JSON file is read for map inputs only, this input is {}", path,
                        type.ToString());
  const DType kt = type.key_type;
  const DType vt = type.inner && type.inner->kind == ir::TypeInfo::Kind::kTensor
                       ? type.inner->elem_type
                       : DType::kUndefined;
  if (kt != DType::kString && kt != DType::kInt64)
    return InvalidError("'{}': the input is {}, expected string or int64 keys", path,
                        type.ToString());
  if (vt != DType::kString && vt != DType::kInt64 && vt != DType::kFloat && vt != DType::kDouble)
    return InvalidError("'{}': the input is {}, expected string, int64, float or double values",
                        path, type.ToString());
  FERRY_ASSIGN_OR_RETURN(std::string text, ReadFileBytes(path));
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidError("'{}' is not valid JSON", path);
  if (!j.is_object())
    return InvalidError("'{}': expected a JSON object {{\"key\": value, ...}} for map input", path);
  const int64_t n = static_cast<int64_t>(j.size());
  Tensor keys(kt, {n}), values(vt, {n});
  int64_t i = 0;
  for (auto it = j.begin(); it != j.end(); ++it, ++i) {
    const std::string& k = it.key();
    if (kt == DType::kString) {
      keys.data<std::string>()[i] = k;
    } else {
      char* end = nullptr;
      errno = 0;
      const long long x = std::strtoll(k.c_str(), &end, 10);
      if (k.empty() || errno != 0 || *end != '\0')
        return InvalidError("'{}': key '{}' is not an int64 (the input's keys are int64)", path, k);
      keys.data<int64_t>()[i] = x;
    }
    const Json& v = it.value();
    if (vt == DType::kString) {
      if (!v.is_string())
        return InvalidError("'{}': the value of key '{}' is not a string", path, k);
      values.data<std::string>()[i] = v.get<std::string>();
    } else if (vt == DType::kInt64) {
      if (!v.is_number_integer())
        return InvalidError("'{}': the value of key '{}' is not an integer", path, k);
      values.data<int64_t>()[i] = v.get<int64_t>();
    } else {
      if (!v.is_number())
        return InvalidError("'{}': the value of key '{}' is not a number", path, k);
      if (vt == DType::kFloat)
        values.data<float>()[i] = static_cast<float>(v.get<double>());
      else
        values.data<double>()[i] = v.get<double>();
    }
  }
  return Value::Map(std::move(keys), std::move(values));
}

}  // namespace ferry::cli

#include "serve/codec.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_text.h"

namespace ferry::serve {
using json = nlohmann::json;

namespace {

// Collects the leaves of a (possibly nested) JSON array in row-major order.
bool Flatten(const json& j, int depth, uint64_t limit, std::vector<const json*>* out) {
  if (!j.is_array()) {
    if (out->size() >= limit) return false;
    out->push_back(&j);
    return true;
  }
  if (depth > 64) return false;
  for (const auto& e : j) {
    if (!Flatten(e, depth + 1, limit, out)) return false;
  }
  return true;
}

template <typename T>
bool ToInt(const json& v, T* out) {
  if (v.is_number_unsigned()) {
    auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
    *out = static_cast<T>(u);
    return true;
  }
  if (v.is_number_integer()) {
    auto s = v.get<int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      if (s < 0) return false;
      if (static_cast<uint64_t>(s) > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
        return false;
      }
    } else {
      if (s < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          s > static_cast<int64_t>(std::numeric_limits<T>::max())) {
        return false;
      }
    }
    *out = static_cast<T>(s);
    return true;
  }
  return false;
}

Error FillFromJson(const std::string& name, const json& data, Tensor* t) {
  std::vector<const json*> leaves;
  uint64_t n = static_cast<uint64_t>(t->size());
  if (!Flatten(data, 0, n, &leaves) || leaves.size() != n) {
    return InvalidArg(fmt::format(
        "input '{}': 'data' holds {} elements, the shape {} needs {}", name,
        leaves.size() >= n ? "more than " + std::to_string(n) : std::to_string(leaves.size()),
        ShapeToString(t->shape()), n));
  }
  auto wrong = [&](size_t i, const char* want) {
    return InvalidArg(fmt::format("input '{}': data element {} is {}, expected {} for {}", name, i,
                                  leaves[i]->type_name(), want, DatatypeName(t->dtype())));
  };
  DType d = t->dtype();
  if (d == DType::kString) {
    for (size_t i = 0; i < n; ++i) {
      if (!leaves[i]->is_string()) return wrong(i, "a string");
      t->data<std::string>()[i] = leaves[i]->get<std::string>();
    }
    return Error::Ok();
  }
  if (d == DType::kBool) {
    for (size_t i = 0; i < n; ++i) {
      if (!leaves[i]->is_boolean()) return wrong(i, "true or false");
      t->data<bool>()[i] = leaves[i]->get<bool>();
    }
    return Error::Ok();
  }
  if (d == DType::kFloat16 || d == DType::kBFloat16) {
    return InvalidArg(
        fmt::format("input '{}': {} data can only be sent as binary data", name, DatatypeName(d)));
  }
  Error err;
  VisitNumeric(d, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t->data<T>();
    for (size_t i = 0; i < n && err.ok(); ++i) {
      const json& v = *leaves[i];
      if constexpr (std::is_floating_point_v<T>) {
        if (!v.is_number())
          err = wrong(i, "a number");
        else
          p[i] = static_cast<T>(v.get<double>());
      } else if constexpr (std::is_integral_v<T>) {
        if (!ToInt<T>(v, &p[i])) err = wrong(i, "an integer in range");
      }
    }
  });
  return err;
}

Error FillFromBinary(const std::string& name, const char* data, uint64_t size, Tensor* t) {
  if (t->dtype() == DType::kString) {
    uint64_t pos = 0;
    for (int64_t i = 0; i < t->size(); ++i) {
      if (size - pos < 4) {
        return InvalidArg(
            fmt::format("input '{}': BYTES element {} has no 4-byte length ({} bytes "
                        "left)",
                        name, i, size - pos));
      }
      uint32_t len = 0;
      std::memcpy(&len, data + pos, 4);
      pos += 4;
      if (len > size - pos) {
        return InvalidArg(fmt::format("input '{}': BYTES element {} claims {} bytes, {} are left",
                                      name, i, len, size - pos));
      }
      t->data<std::string>()[i].assign(data + pos, len);
      pos += len;
    }
    if (pos != size) {
      return InvalidArg(fmt::format("input '{}': {} bytes of BYTES data left after {} elements",
                                    name, size - pos, t->size()));
    }
    return Error::Ok();
  }
  if (size != t->nbytes()) {
    return InvalidArg(
        fmt::format("input '{}': binary_data_size is {} bytes, the shape {} of {} needs {}", name,
                    size, ShapeToString(t->shape()), DatatypeName(t->dtype()), t->nbytes()));
  }
  std::memcpy(t->raw(), data, size);
  if (t->dtype() == DType::kBool) {
    for (int64_t i = 0; i < t->size(); ++i) {
      uint8_t b = reinterpret_cast<const uint8_t*>(data)[i];
      if (b > 1)
        return InvalidArg(fmt::format("input '{}': BOOL element {} is {}, not 0 or 1", name, i, b));
    }
  }
  return Error::Ok();
}

bool ParamBool(const json& params, const char* key, bool* out, Error* err) {
  if (!params.is_object() || !params.contains(key)) return false;
  const auto& v = params[key];
  if (!v.is_boolean()) {
    *err = InvalidArg(fmt::format("parameter '{}' must be true or false", key));
    return false;
  }
  *out = v.get<bool>();
  return true;
}

bool ParamUint(const json& params, const char* key, uint64_t* out, Error* err) {
  if (!params.is_object() || !params.contains(key)) return false;
  const auto& v = params[key];
  if (!v.is_number_integer() ||
      (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0)) {
    *err = InvalidArg(fmt::format("parameter '{}' must be a non-negative integer", key));
    return false;
  }
  *out = v.get<uint64_t>();
  return true;
}

}  // namespace

std::string ErrorJson(const std::string& message) {
  return JsonText(json{{"error", message}});
}

Error ParseInferRequest(const std::string& header_length, const std::string& body,
                        const RequestLimits& limits, InferRequest* request) {
  if (body.size() > limits.max_body_bytes) {
    return InvalidArg(fmt::format("request body of {} bytes exceeds the limit of {}", body.size(),
                                  limits.max_body_bytes));
  }
  uint64_t json_len = body.size();
  if (!header_length.empty()) {
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(header_length.c_str(), &end, 10);
    if (errno || *end || header_length[0] == '-' || v > body.size()) {
      return InvalidArg(
          fmt::format("Inference-Header-Content-Length '{}' is not a length within the "
                      "body of {} bytes",
                      header_length.substr(0, 32), body.size()));
    }
    json_len = v;
  }
  if (json_len == 0) {
    return InvalidArg(
        "raw binary requests (Inference-Header-Content-Length: 0) are not supported; "
        "send a JSON header");
  }
  json j;
  try {
    j = json::parse(body.begin(), body.begin() + static_cast<std::ptrdiff_t>(json_len));
  } catch (const json::exception& e) {
    return InvalidArg(fmt::format("failed to parse the request JSON: {}", e.what()));
  }
  if (!j.is_object()) return InvalidArg("the request JSON must be an object");
  Error err;
  if (j.contains("id")) {
    if (!j["id"].is_string()) return InvalidArg("'id' must be a string");
    request->id = j["id"].get<std::string>();
  }
  if (j.contains("parameters")) {
    const auto& p = j["parameters"];
    if (!p.is_object()) return InvalidArg("'parameters' must be an object");
    ParamBool(p, "binary_data_output", &request->binary_output, &err);
    ParamUint(p, "priority", &request->priority, &err);
    ParamUint(p, "timeout", &request->timeout_us, &err);
    if (!err.ok()) return err;
  }
  if (!j.contains("inputs") || !j["inputs"].is_array()) {
    return InvalidArg("the request JSON has no 'inputs' list");
  }
  const char* binary = body.data() + json_len;
  uint64_t binary_left = body.size() - json_len;
  uint64_t total_bytes = 0;
  for (const auto& in : j["inputs"]) {
    if (!in.is_object() || !in.contains("name") || !in["name"].is_string()) {
      return InvalidArg("each input needs a 'name' string");
    }
    std::string name = in["name"].get<std::string>();
    if (!in.contains("datatype") || !in["datatype"].is_string()) {
      return InvalidArg(fmt::format("input '{}': 'datatype' is missing", name));
    }
    std::string dt = in["datatype"].get<std::string>();
    auto dtype = DTypeFromDatatype(dt);
    if (!dtype) return InvalidArg(fmt::format("input '{}': unknown datatype '{}'", name, dt));
    if (!in.contains("shape") || !in["shape"].is_array()) {
      return InvalidArg(fmt::format("input '{}': 'shape' must be a list of integers", name));
    }
    if (in["shape"].size() > 32) {
      return InvalidArg(fmt::format("input '{}': rank {} is over 32", name, in["shape"].size()));
    }
    Shape shape;
    uint64_t elements = 1;
    bool over = false;
    for (const auto& d : in["shape"]) {
      if (!d.is_number_integer() || (!d.is_number_unsigned() && d.get<int64_t>() < 0)) {
        return InvalidArg(
            fmt::format("input '{}': 'shape' must be a list of non-negative integers", name));
      }
      uint64_t v = d.get<uint64_t>();
      if (v > limits.max_elements) over = true;
      shape.push_back(static_cast<int64_t>(std::min<uint64_t>(v, limits.max_elements + 1)));
      if (!over) {
        elements *= v;
        if (elements > limits.max_elements) over = true;
      }
    }
    if (over) {
      return InvalidArg(fmt::format("input '{}': shape {} holds more than the limit of {} elements",
                                    name, JsonText(in["shape"]), limits.max_elements));
    }
    uint64_t bytes = elements * (*dtype == DType::kString ? 1 : DTypeSize(*dtype));
    total_bytes += bytes;
    if (total_bytes > limits.max_total_bytes) {
      return InvalidArg(fmt::format("input '{}': the inputs need more than the limit of {} bytes",
                                    name, limits.max_total_bytes));
    }
    const json* params = in.contains("parameters") ? &in["parameters"] : nullptr;
    uint64_t bsize = 0;
    bool has_binary = params && ParamUint(*params, "binary_data_size", &bsize, &err);
    if (!err.ok()) return err;
    if (has_binary) {
      if (bsize > binary_left) {
        return InvalidArg(
            fmt::format("input '{}': binary_data_size is {} bytes, only {} bytes of "
                        "binary data are left in the body",
                        name, bsize, binary_left));
      }
      if (*dtype != DType::kString && bsize != bytes) {
        return InvalidArg(
            fmt::format("input '{}': binary_data_size is {} bytes, the shape {} of {} "
                        "needs {}",
                        name, bsize, JsonText(in["shape"]), dt, bytes));
      }
      if (*dtype == DType::kString && bsize < 4 * elements) {
        return InvalidArg(
            fmt::format("input '{}': binary_data_size {} cannot hold {} BYTES elements", name,
                        bsize, elements));
      }
    } else if (!in.contains("data")) {
      return InvalidArg(fmt::format("input '{}' has neither 'data' nor binary_data_size", name));
    } else if (*dtype != DType::kString && in["data"].is_array() && in["data"].size() > elements &&
               in["shape"].size() <= 1) {
      return InvalidArg(fmt::format(
          "input '{}': 'data' holds more than the {} elements of the shape", name, elements));
    }
    InferInput input;
    input.name = name;
    input.tensor = Tensor(*dtype, shape);
    Error e = has_binary ? FillFromBinary(name, binary, bsize, &input.tensor)
                         : FillFromJson(name, in["data"], &input.tensor);
    if (!e.ok()) return e;
    if (has_binary) {
      binary += bsize;
      binary_left -= bsize;
    }
    request->inputs.push_back(std::move(input));
  }
  if (binary_left != 0) {
    return InvalidArg(
        fmt::format("{} bytes of binary data follow the JSON header but no input claims "
                    "them (binary_data_size)",
                    binary_left));
  }
  if (j.contains("outputs")) {
    if (!j["outputs"].is_array()) return InvalidArg("'outputs' must be a list");
    for (const auto& o : j["outputs"]) {
      if (!o.is_object() || !o.contains("name") || !o["name"].is_string()) {
        return InvalidArg("each requested output needs a 'name' string");
      }
      RequestedOutput ro;
      ro.name = o["name"].get<std::string>();
      ro.binary = request->binary_output;
      if (o.contains("parameters")) {
        const auto& p = o["parameters"];
        ParamBool(p, "binary_data", &ro.binary, &err);
        uint64_t c = 0;
        if (ParamUint(p, "classification", &c, &err)) ro.classification = static_cast<int64_t>(c);
        if (!err.ok()) return InvalidArg(fmt::format("output '{}': {}", ro.name, err.message));
      }
      request->outputs.push_back(std::move(ro));
    }
  }
  return Error::Ok();
}

namespace {

json TensorData(const Tensor& t) {
  json data = json::array();
  if (t.dtype() == DType::kString) {
    for (const auto& s : t.span<std::string>()) data.push_back(s);
  } else if (t.dtype() == DType::kBool) {
    for (int64_t i = 0; i < t.size(); ++i) data.push_back(t.data<bool>()[i]);
  } else {
    VisitNumeric(t.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* p = t.data<T>();
      for (int64_t i = 0; i < t.size(); ++i) {
        if constexpr (std::is_integral_v<T>) {
          data.push_back(p[i]);
        } else {
          data.push_back(static_cast<double>(static_cast<float>(p[i])));
        }
      }
    });
  }
  return data;
}

void AppendBinary(const Tensor& t, std::string* out) {
  if (t.dtype() == DType::kString) {
    for (const auto& s : t.span<std::string>()) {
      uint32_t len = static_cast<uint32_t>(s.size());
      out->append(reinterpret_cast<const char*>(&len), 4);
      out->append(s);
    }
  } else {
    out->append(static_cast<const char*>(t.raw()), t.nbytes());
  }
}

}  // namespace

void EncodeInferResponse(const InferResponse& r, std::string* body, size_t* header_length) {
  json j;
  j["model_name"] = r.model;
  if (!r.version.empty()) j["model_version"] = r.version;
  if (!r.id.empty()) j["id"] = r.id;
  json outputs = json::array();
  std::string binary;
  for (const auto& o : r.outputs) {
    json out;
    out["name"] = o.name;
    out["datatype"] = std::string(DatatypeName(o.tensor.dtype()));
    out["shape"] = o.tensor.shape();
    if (o.binary) {
      size_t before = binary.size();
      AppendBinary(o.tensor, &binary);
      out["parameters"] = {{"binary_data_size", binary.size() - before}};
    } else {
      out["data"] = TensorData(o.tensor);
    }
    outputs.push_back(std::move(out));
  }
  j["outputs"] = std::move(outputs);
  *body = JsonText(j);
  *header_length = 0;
  bool any_binary = false;
  for (const auto& o : r.outputs) any_binary = any_binary || o.binary;
  if (any_binary) {
    *header_length = body->size();
    body->append(binary);
  }
}

}  // namespace ferry::serve

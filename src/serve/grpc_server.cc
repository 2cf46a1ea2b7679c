// The gRPC front end (serve/grpc_server.h): a synchronous grpc::Server whose handlers decode a
// request into serve/types.h, call the Service and encode its answer. Decoding validates every
// length and count against the message before anything is allocated, so a request that
// declares more elements than it carries costs nothing beyond the message itself.
#include "serve/grpc_server.h"

#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>

#include "serve/proto/health.grpc.pb.h"
#include "serve/proto/inference.grpc.pb.h"

namespace ferry::serve {
namespace {

namespace pb = ::inference;

// Threads the server may run at once: handlers block while the Service runs a request, so this
// bounds the calls in progress (gRPC's thread quota; past it gRPC answers RESOURCE_EXHAUSTED
// rather than start a thread). The Service's own queue bound usually refuses first.
constexpr int kMaxThreads = 256;
// Handler threads kept waiting for calls once started (see StartGrpcServer).
constexpr int kMaxPollers = 64;

grpc::StatusCode ToGrpcCode(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kOk:
      return grpc::StatusCode::OK;
    case ErrorKind::kInvalidArg:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case ErrorKind::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case ErrorKind::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case ErrorKind::kUnsupported:
      return grpc::StatusCode::UNIMPLEMENTED;
    case ErrorKind::kInternal:
      return grpc::StatusCode::INTERNAL;
    case ErrorKind::kUnauthenticated:
      return grpc::StatusCode::UNAUTHENTICATED;
    case ErrorKind::kPermissionDenied:
      return grpc::StatusCode::PERMISSION_DENIED;
  }
  return grpc::StatusCode::UNKNOWN;
}

grpc::Status ToGrpc(const Error& e) {
  if (e.ok()) return grpc::Status::OK;
  return grpc::Status(ToGrpcCode(e.kind), e.message);
}

grpc::Status InvalidArg(const std::string& message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
}
grpc::Status Unimplemented(const std::string& message) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, message);
}

// --- tensors ---------------------------------------------------------------------------------

// Validates the declared shape; `count` gets its element count.
grpc::Status CheckShape(const std::string& name, const Shape& shape, int64_t* count) {
  for (int64_t d : shape) {
    if (d < 0) {
      return InvalidArg(
          fmt::format("input '{}': shape {} has a negative dim", name, ShapeToString(shape)));
    }
  }
  *count = NumElements(shape);
  return grpc::Status::OK;
}

// One input's raw_input_contents entry into a tensor of `dtype` and `shape`.
grpc::Status DecodeRaw(const std::string& name, const std::string& datatype, DType dtype,
                       const Shape& shape, int64_t count, const std::string& raw, Tensor* out) {
  const uint64_t have = raw.size();
  if (dtype == DType::kString) {
    // Each element is at least its 4-byte length: refuse a count the bytes cannot hold before
    // allocating one string per element.
    if (static_cast<uint64_t>(count) > have / 4) {
      return InvalidArg(fmt::format(
          "input '{}': raw content has {} bytes, too few for the {} BYTES elements of shape {}",
          name, have, count, ShapeToString(shape)));
    }
    Tensor t(DType::kString, shape);
    std::string* s = t.data<std::string>();
    uint64_t at = 0;
    for (int64_t i = 0; i < count; ++i) {
      if (have - at < 4) {
        return InvalidArg(fmt::format(
            "input '{}': raw content ends inside the length of BYTES element {} (of {})", name, i,
            count));
      }
      uint32_t len = 0;
      for (int b = 3; b >= 0; --b) len = (len << 8) | static_cast<uint8_t>(raw[at + b]);
      at += 4;
      if (have - at < len) {
        return InvalidArg(fmt::format(
            "input '{}': BYTES element {} declares {} bytes, {} remain in the raw content", name, i,
            len, have - at));
      }
      s[i].assign(raw.data() + at, len);
      at += len;
    }
    if (at != have) {
      return InvalidArg(fmt::format(
          "input '{}': raw content has {} bytes, its {} BYTES elements of shape {} use {}", name,
          have, count, ShapeToString(shape), at));
    }
    *out = std::move(t);
    return grpc::Status::OK;
  }
  const uint64_t size = DTypeSize(dtype);
  uint64_t want = 0;
  const bool overflow = __builtin_mul_overflow(static_cast<uint64_t>(count), size, &want);
  if (overflow || want != have) {
    return InvalidArg(fmt::format(
        "input '{}': raw content has {} bytes, expected {} ({} elements of shape {} x {} bytes "
        "of {})",
        name, have, overflow ? std::string("over 2^64") : std::to_string(want), count,
        ShapeToString(shape), size, datatype));
  }
  Tensor t = Tensor::Uninitialized(dtype, shape);
  if (dtype == DType::kBool) {
    bool* d = t.data<bool>();
    for (int64_t i = 0; i < count; ++i) d[i] = raw[static_cast<size_t>(i)] != 0;
  } else if (have > 0) {
    std::memcpy(t.raw(), raw.data(), have);
  }
  *out = std::move(t);
  return grpc::Status::OK;
}

// Copies `values` (one typed contents field) into a new tensor, refusing values out of T's range.
template <typename T, typename Field>
grpc::Status FillTyped(const std::string& name, const std::string& datatype, DType dtype,
                       const Shape& shape, const Field& values, Tensor* out) {
  Tensor t = Tensor::Uninitialized(dtype, shape);
  T* d = t.data<T>();
  int64_t i = 0;
  for (const auto& v : values) {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (!std::in_range<T>(v)) {
        return InvalidArg(fmt::format("input '{}': value {} at element {} is out of range for {}",
                                      name, v, i, datatype));
      }
    }
    d[i++] = static_cast<T>(v);
  }
  *out = std::move(t);
  return grpc::Status::OK;
}

int64_t TypedCount(const pb::InferTensorContents& c) {
  return int64_t{c.bool_contents_size()} + c.int_contents_size() + c.int64_contents_size() +
         c.uint_contents_size() + c.uint64_contents_size() + c.fp32_contents_size() +
         c.fp64_contents_size() + c.bytes_contents_size();
}

// One input's typed `contents` into a tensor.
grpc::Status DecodeTyped(const std::string& name, const std::string& datatype, DType dtype,
                         const Shape& shape, int64_t count, const pb::InferTensorContents& c,
                         Tensor* out) {
  int64_t have = -1;
  std::string_view field;
  switch (dtype) {
    case DType::kBool:
      have = c.bool_contents_size(), field = "bool_contents";
      break;
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
      have = c.int_contents_size(), field = "int_contents";
      break;
    case DType::kInt64:
      have = c.int64_contents_size(), field = "int64_contents";
      break;
    case DType::kUint8:
    case DType::kUint16:
    case DType::kUint32:
      have = c.uint_contents_size(), field = "uint_contents";
      break;
    case DType::kUint64:
      have = c.uint64_contents_size(), field = "uint64_contents";
      break;
    case DType::kFloat:
      have = c.fp32_contents_size(), field = "fp32_contents";
      break;
    case DType::kDouble:
      have = c.fp64_contents_size(), field = "fp64_contents";
      break;
    case DType::kString:
      have = c.bytes_contents_size(), field = "bytes_contents";
      break;
    default:
      return InvalidArg(
          fmt::format("input '{}': {} has no typed contents field; send it in raw_input_contents",
                      name, datatype));
  }
  const int64_t total = TypedCount(c);
  if (total != have) {
    return InvalidArg(fmt::format("input '{}': {} is carried in {}; {} values are in other fields",
                                  name, datatype, field, total - have));
  }
  if (have != count) {
    return InvalidArg(fmt::format("input '{}': {} has {} values, shape {} needs {}", name, field,
                                  have, ShapeToString(shape), count));
  }
  switch (dtype) {
    case DType::kBool:
      return FillTyped<bool>(name, datatype, dtype, shape, c.bool_contents(), out);
    case DType::kInt8:
      return FillTyped<int8_t>(name, datatype, dtype, shape, c.int_contents(), out);
    case DType::kInt16:
      return FillTyped<int16_t>(name, datatype, dtype, shape, c.int_contents(), out);
    case DType::kInt32:
      return FillTyped<int32_t>(name, datatype, dtype, shape, c.int_contents(), out);
    case DType::kInt64:
      return FillTyped<int64_t>(name, datatype, dtype, shape, c.int64_contents(), out);
    case DType::kUint8:
      return FillTyped<uint8_t>(name, datatype, dtype, shape, c.uint_contents(), out);
    case DType::kUint16:
      return FillTyped<uint16_t>(name, datatype, dtype, shape, c.uint_contents(), out);
    case DType::kUint32:
      return FillTyped<uint32_t>(name, datatype, dtype, shape, c.uint_contents(), out);
    case DType::kUint64:
      return FillTyped<uint64_t>(name, datatype, dtype, shape, c.uint64_contents(), out);
    case DType::kFloat:
      return FillTyped<float>(name, datatype, dtype, shape, c.fp32_contents(), out);
    case DType::kDouble:
      return FillTyped<double>(name, datatype, dtype, shape, c.fp64_contents(), out);
    case DType::kString: {
      Tensor t(DType::kString, shape);
      std::string* s = t.data<std::string>();
      for (int64_t i = 0; i < count; ++i) s[i] = c.bytes_contents(static_cast<int>(i));
      *out = std::move(t);
      return grpc::Status::OK;
    }
    default:
      return InvalidArg(fmt::format("input '{}': unexpected datatype {}", name, datatype));
  }
}

bool HasSharedMemory(const google::protobuf::Map<std::string, pb::InferParameter>& params) {
  return params.count("shared_memory_region") > 0;
}

// A non-negative integer parameter (int64 or uint64).
grpc::Status ParamUint(const std::string& key, const pb::InferParameter& p, uint64_t* out) {
  if (p.parameter_choice_case() == pb::InferParameter::kUint64Param) {
    *out = p.uint64_param();
    return grpc::Status::OK;
  }
  if (p.parameter_choice_case() == pb::InferParameter::kInt64Param && p.int64_param() >= 0) {
    *out = static_cast<uint64_t>(p.int64_param());
    return grpc::Status::OK;
  }
  return InvalidArg(
      fmt::format("parameter '{}' must be a non-negative int64_param or uint64_param", key));
}

// The whole request into `out`.
grpc::Status DecodeRequest(const pb::ModelInferRequest& req, InferRequest* out) {
  out->model = req.model_name();
  out->version = req.model_version();
  out->id = req.id();
  for (const auto& [key, value] : req.parameters()) {
    if (key == "priority") {
      grpc::Status st = ParamUint(key, value, &out->priority);
      if (!st.ok()) return st;
    } else if (key == "timeout") {
      grpc::Status st = ParamUint(key, value, &out->timeout_us);
      if (!st.ok()) return st;
    } else if (key == "sequence_id") {
      const bool zero = (value.parameter_choice_case() == pb::InferParameter::kInt64Param &&
                         value.int64_param() == 0) ||
                        (value.parameter_choice_case() == pb::InferParameter::kStringParam &&
                         value.string_param().empty());
      if (!zero) return Unimplemented("sequence batching (parameter 'sequence_id') is not served");
    }
  }

  const int num_inputs = req.inputs_size();
  const bool raw = req.raw_input_contents_size() > 0;
  if (raw && req.raw_input_contents_size() != num_inputs) {
    return InvalidArg(fmt::format("raw_input_contents has {} entries for {} inputs",
                                  req.raw_input_contents_size(), num_inputs));
  }
  std::set<std::string_view> seen;
  out->inputs.reserve(static_cast<size_t>(num_inputs));
  for (int i = 0; i < num_inputs; ++i) {
    const pb::ModelInferRequest::InferInputTensor& in = req.inputs(i);
    const std::string& name = in.name();
    if (!seen.insert(name).second) {
      return InvalidArg(fmt::format("input '{}' is given twice", name));
    }
    if (HasSharedMemory(in.parameters())) {
      return Unimplemented(fmt::format("input '{}': shared memory is not served", name));
    }
    std::optional<DType> dtype = DTypeFromDatatype(in.datatype());
    if (!dtype) {
      return InvalidArg(fmt::format("input '{}': unknown datatype '{}'", name, in.datatype()));
    }
    Shape shape(in.shape().begin(), in.shape().end());
    int64_t count = 0;
    grpc::Status st = CheckShape(name, shape, &count);
    if (!st.ok()) return st;
    InferInput decoded;
    decoded.name = name;
    const bool typed = in.has_contents() && TypedCount(in.contents()) > 0;
    if (raw) {
      if (typed) {
        return InvalidArg(fmt::format(
            "input '{}' sets contents while the request uses raw_input_contents", name));
      }
      st = DecodeRaw(name, in.datatype(), *dtype, shape, count, req.raw_input_contents(i),
                     &decoded.tensor);
    } else if (count == 0 && !typed) {
      decoded.tensor = Tensor(*dtype, shape);
    } else if (typed) {
      st = DecodeTyped(name, in.datatype(), *dtype, shape, count, in.contents(), &decoded.tensor);
    } else {
      return InvalidArg(
          fmt::format("input '{}': no data (neither contents nor raw_input_contents)", name));
    }
    if (!st.ok()) return st;
    out->inputs.push_back(std::move(decoded));
  }

  for (const auto& o : req.outputs()) {
    if (HasSharedMemory(o.parameters())) {
      return Unimplemented(fmt::format("output '{}': shared memory is not served", o.name()));
    }
    RequestedOutput ro;
    ro.name = o.name();
    auto it = o.parameters().find("classification");
    if (it != o.parameters().end()) {
      uint64_t n = 0;
      grpc::Status st = ParamUint("classification", it->second, &n);
      if (!st.ok()) return st;
      ro.classification = static_cast<int64_t>(std::min<uint64_t>(n, INT64_MAX));
    }
    out->outputs.push_back(std::move(ro));
  }
  return grpc::Status::OK;
}

// One output tensor as raw bytes (BYTES: 4-byte little-endian length + bytes per element).
void EncodeRaw(const Tensor& t, std::string* out) {
  if (t.dtype() == DType::kString) {
    size_t total = 0;
    for (const std::string& s : t.span<std::string>()) total += 4 + s.size();
    out->reserve(total);
    for (const std::string& s : t.span<std::string>()) {
      const uint32_t len = static_cast<uint32_t>(s.size());
      const char le[4] = {static_cast<char>(len & 0xff), static_cast<char>((len >> 8) & 0xff),
                          static_cast<char>((len >> 16) & 0xff),
                          static_cast<char>((len >> 24) & 0xff)};
      out->append(le, 4);
      out->append(s);
    }
    return;
  }
  out->assign(static_cast<const char*>(t.raw()), t.nbytes());
}

void FillDuration(const Duration& d, pb::StatisticDuration* out) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}

// --- the service -----------------------------------------------------------------------------

class InferenceService final : public pb::GRPCInferenceService::Service {
 public:
  explicit InferenceService(serve::Service* service) : service_(service) {}

  grpc::Status ServerLive(grpc::ServerContext*, const pb::ServerLiveRequest*,
                          pb::ServerLiveResponse* resp) override {
    resp->set_live(service_->Live());
    return grpc::Status::OK;
  }

  grpc::Status ServerReady(grpc::ServerContext*, const pb::ServerReadyRequest*,
                           pb::ServerReadyResponse* resp) override {
    resp->set_ready(service_->Ready());
    return grpc::Status::OK;
  }

  grpc::Status ServerMetadata(grpc::ServerContext*, const pb::ServerMetadataRequest*,
                              pb::ServerMetadataResponse* resp) override {
    serve::ServerMetadata md = service_->Metadata();
    resp->set_name(md.name);
    resp->set_version(md.version);
    for (const std::string& e : md.extensions) resp->add_extensions(e);
    return grpc::Status::OK;
  }

  grpc::Status ModelReady(grpc::ServerContext* ctx, const pb::ModelReadyRequest* req,
                          pb::ModelReadyResponse* resp) override {
    if (grpc::Status st = Authorize(ctx, Scope::kInfer, req->name()); !st.ok()) return st;
    Error e = service_->ModelReady(req->name(), req->version());
    // Not ready, unknown or still loading are all "not ready": the client reads the bool.
    if (!e.ok() && e.kind != ErrorKind::kNotFound && e.kind != ErrorKind::kUnavailable) {
      return ToGrpc(e);
    }
    resp->set_ready(e.ok());
    return grpc::Status::OK;
  }

  grpc::Status ModelMetadata(grpc::ServerContext* ctx, const pb::ModelMetadataRequest* req,
                             pb::ModelMetadataResponse* resp) override {
    if (grpc::Status st = Authorize(ctx, Scope::kInfer, req->name()); !st.ok()) return st;
    serve::ModelMetadata md;
    if (Error e = service_->GetModelMetadata(req->name(), req->version(), &md); !e.ok()) {
      return ToGrpc(e);
    }
    resp->set_name(md.name);
    for (const std::string& v : md.versions) resp->add_versions(v);
    resp->set_platform(md.platform);
    auto fill = [](const TensorMetadata& t, pb::ModelMetadataResponse::TensorMetadata* out) {
      out->set_name(t.name);
      out->set_datatype(t.datatype);
      for (int64_t d : t.shape) out->add_shape(d);
    };
    for (const TensorMetadata& t : md.inputs) fill(t, resp->add_inputs());
    for (const TensorMetadata& t : md.outputs) fill(t, resp->add_outputs());
    return grpc::Status::OK;
  }

  grpc::Status ModelInfer(grpc::ServerContext* ctx, const pb::ModelInferRequest* req,
                          pb::ModelInferResponse* resp) override {
    return InferOne(ctx, req, resp);
  }

  // Requests answered one after another in arrival order, each with its own response or error
  // (the stream goes on after an error); the stream ends when the client closes its side or
  // the server shuts down. One stream is one caller: its requests do not overlap (a client that
  // wants them to uses several streams or ModelInfer calls).
  grpc::Status ModelStreamInfer(grpc::ServerContext* ctx,
                                grpc::ServerReaderWriter<pb::ModelStreamInferResponse,
                                                         pb::ModelInferRequest>* stream) override {
    pb::ModelInferRequest req;
    while (stream->Read(&req)) {
      pb::ModelStreamInferResponse out;
      if (grpc::Status st = InferOne(ctx, &req, out.mutable_infer_response()); !st.ok()) {
        out.clear_infer_response();
        out.set_error_message(st.error_message());
      }
      if (!stream->Write(out)) break;  // the client went away
    }
    return grpc::Status::OK;
  }

 private:
  grpc::Status InferOne(grpc::ServerContext* ctx, const pb::ModelInferRequest* req,
                        pb::ModelInferResponse* resp) {
    if (grpc::Status st = Authorize(ctx, Scope::kInfer, req->model_name()); !st.ok()) return st;
    InferRequest request;
    if (grpc::Status st = DecodeRequest(*req, &request); !st.ok()) return st;
    InferResponse answer;
    if (Error e = service_->Infer(std::move(request), &answer); !e.ok()) return ToGrpc(e);
    resp->set_model_name(answer.model.empty() ? req->model_name() : answer.model);
    resp->set_model_version(answer.version);
    resp->set_id(answer.id.empty() ? req->id() : answer.id);
    for (const InferOutput& o : answer.outputs) {
      std::string_view datatype = DatatypeName(o.tensor.dtype());
      if (datatype.empty()) {
        return grpc::Status(grpc::StatusCode::INTERNAL,
                            fmt::format("output '{}': dtype {} has no protocol datatype", o.name,
                                        DTypeName(o.tensor.dtype())));
      }
      pb::ModelInferResponse::InferOutputTensor* t = resp->add_outputs();
      t->set_name(o.name);
      t->set_datatype(std::string(datatype));
      for (int64_t d : o.tensor.shape()) t->add_shape(d);
      EncodeRaw(o.tensor, resp->add_raw_output_contents());
    }
    return grpc::Status::OK;
  }

 public:
  grpc::Status ModelConfig(grpc::ServerContext* ctx, const pb::ModelConfigRequest* req,
                           pb::ModelConfigResponse* resp) override {
    if (grpc::Status st = Authorize(ctx, Scope::kInfer, req->name()); !st.ok()) return st;
    ModelConfigInfo c;
    if (Error e = service_->GetModelConfig(req->name(), req->version(), &c); !e.ok()) {
      return ToGrpc(e);
    }
    pb::ModelConfig* m = resp->mutable_config();
    m->set_name(c.name);
    m->set_platform(c.platform);
    m->set_backend("ferry");
    m->set_default_model_filename("model.onnx");
    m->set_max_batch_size(static_cast<int32_t>(c.max_batch_size));
    pb::ModelVersionPolicy* vp = m->mutable_version_policy();
    if (c.policy == ServeConfig::Policy::kAll) {
      vp->mutable_all();
    } else if (c.policy == ServeConfig::Policy::kSpecific) {
      for (int64_t v : c.specific) vp->mutable_specific()->add_versions(v);
    } else {
      vp->mutable_latest()->set_num_versions(static_cast<uint32_t>(c.latest));
    }
    for (const TensorMetadata& t : c.inputs) {
      pb::ModelInput* in = m->add_input();
      in->set_name(t.name);
      in->set_data_type(static_cast<pb::DataType>(TritonDataTypeNumber(t.datatype)));
      for (int64_t d : t.shape) in->add_dims(d);
    }
    for (const TensorMetadata& t : c.outputs) {
      pb::ModelOutput* out = m->add_output();
      out->set_name(t.name);
      out->set_data_type(static_cast<pb::DataType>(TritonDataTypeNumber(t.datatype)));
      for (int64_t d : t.shape) out->add_dims(d);
      out->set_label_filename(c.label_filename);
    }
    pb::ModelInstanceGroup* g = m->add_instance_group();
    g->set_name(c.name);
    g->set_kind(pb::ModelInstanceGroup::KIND_CPU);
    g->set_count(c.instances);
    if (c.dynamic_batching) {
      pb::ModelDynamicBatching* b = m->mutable_dynamic_batching();
      for (int64_t p : c.preferred_batch_sizes)
        b->add_preferred_batch_size(static_cast<int32_t>(p));
      b->set_max_queue_delay_microseconds(c.max_queue_delay_us);
      b->set_priority_levels(c.priority_levels);
      b->set_default_priority_level(c.default_priority);
      pb::ModelQueuePolicy* q = b->mutable_default_queue_policy();
      q->set_default_timeout_microseconds(c.default_timeout_us);
      q->set_allow_timeout_override(true);
      q->set_max_queue_size(static_cast<uint32_t>(c.max_queue_size));
    }
    return grpc::Status::OK;
  }

  grpc::Status ModelStatistics(grpc::ServerContext* ctx, const pb::ModelStatisticsRequest* req,
                               pb::ModelStatisticsResponse* resp) override {
    if (grpc::Status st = Authorize(ctx, Scope::kAdmin, req->name()); !st.ok()) return st;
    std::vector<serve::ModelStatistics> stats;
    if (Error e = service_->Statistics(req->name(), req->version(), &stats); !e.ok()) {
      return ToGrpc(e);
    }
    for (const serve::ModelStatistics& s : stats) {
      pb::ModelStatistics* m = resp->add_model_stats();
      m->set_name(s.name);
      m->set_version(s.version);
      m->set_last_inference(s.last_inference_ms);
      m->set_inference_count(s.inference_count);
      m->set_execution_count(s.execution_count);
      pb::InferStatistics* is = m->mutable_inference_stats();
      FillDuration(s.success, is->mutable_success());
      FillDuration(s.fail, is->mutable_fail());
      FillDuration(s.queue, is->mutable_queue());
      FillDuration(s.compute_input, is->mutable_compute_input());
      FillDuration(s.compute_infer, is->mutable_compute_infer());
      FillDuration(s.compute_output, is->mutable_compute_output());
      is->mutable_cache_hit();
      is->mutable_cache_miss();
      for (const BatchStat& b : s.batch_stats) {
        pb::InferBatchStatistics* bs = m->add_batch_stats();
        bs->set_batch_size(static_cast<uint64_t>(b.batch_size));
        FillDuration(b.compute_input, bs->mutable_compute_input());
        FillDuration(b.compute_infer, bs->mutable_compute_infer());
        FillDuration(b.compute_output, bs->mutable_compute_output());
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status RepositoryIndex(grpc::ServerContext* ctx, const pb::RepositoryIndexRequest* req,
                               pb::RepositoryIndexResponse* resp) override {
    if (grpc::Status st = Authorize(ctx, Scope::kAdmin, ""); !st.ok()) return st;
    for (const ModelIndexEntry& e : service_->RepositoryIndex(req->ready())) {
      pb::RepositoryIndexResponse::ModelIndex* m = resp->add_models();
      m->set_name(e.name);
      m->set_version(e.version);
      m->set_state(e.state);
      m->set_reason(e.reason);
    }
    return grpc::Status::OK;
  }

  grpc::Status RepositoryModelLoad(grpc::ServerContext* ctx,
                                   const pb::RepositoryModelLoadRequest* req,
                                   pb::RepositoryModelLoadResponse*) override {
    if (grpc::Status st = Authorize(ctx, Scope::kAdmin, req->model_name()); !st.ok()) return st;
    if (req->model_name().empty()) return InvalidArg("model_name is empty");
    for (const auto& [key, value] : req->parameters()) {
      if (key == "config" || key.rfind("file:", 0) == 0) {
        return Unimplemented(fmt::format(
            "load parameter '{}': loading with an override config or files is not served", key));
      }
    }
    return ToGrpc(service_->LoadModel(req->model_name()));
  }

  grpc::Status RepositoryModelUnload(grpc::ServerContext* ctx,
                                     const pb::RepositoryModelUnloadRequest* req,
                                     pb::RepositoryModelUnloadResponse*) override {
    if (grpc::Status st = Authorize(ctx, Scope::kAdmin, req->model_name()); !st.ok()) return st;
    if (req->model_name().empty()) return InvalidArg("model_name is empty");
    return ToGrpc(service_->UnloadModel(req->model_name()));
  }

 private:
  // The `authorization` metadata ("Bearer KEY") checked for `scope` on `model`.
  grpc::Status Authorize(grpc::ServerContext* ctx, Scope scope, const std::string& model) const {
    if (!service_->auth_enabled()) return grpc::Status::OK;
    std::string token;
    const auto& md = ctx->client_metadata();
    auto it = md.find("authorization");
    if (it != md.end()) {
      std::string_view value(it->second.data(), it->second.size());
      constexpr std::string_view kBearer = "bearer ";
      const bool bearer =
          value.size() > kBearer.size() &&
          std::equal(kBearer.begin(), kBearer.end(), value.begin(), [](char a, char b) {
            return a == std::tolower(static_cast<unsigned char>(b));
          });
      if (!bearer) {
        return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                            "the authorization metadata must be 'Bearer KEY'");
      }
      value.remove_prefix(kBearer.size());
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      token.assign(value);
    }
    return ToGrpc(service_->Authorize(token, scope, model));
  }

  serve::Service* service_;
};

// grpc.health.v1.Health: "" (the server) and "inference.GRPCInferenceService" are SERVING while
// the server is ready (live, the start-up scan done, not draining), else NOT_SERVING; any other
// service name is NOT_FOUND (Check) or SERVICE_UNKNOWN (Watch). No API key is needed (as for
// the HTTP health endpoints). Watch sends the status, then each change, checking every
// kWatchPollMs; at most kMaxWatches streams at once (each holds a handler thread), more are
// RESOURCE_EXHAUSTED; streams end when the client cancels or the server shuts down.
class HealthService final : public ::grpc::health::v1::Health::Service {
 public:
  using Response = ::grpc::health::v1::HealthCheckResponse;
  static constexpr int kMaxWatches = 16;
  static constexpr int kWatchPollMs = 200;

  explicit HealthService(serve::Service* service) : service_(service) {}

  grpc::Status Check(grpc::ServerContext*, const ::grpc::health::v1::HealthCheckRequest* req,
                     Response* resp) override {
    if (!Known(req->service()))
      return grpc::Status(
          grpc::StatusCode::NOT_FOUND,
          "unknown service '" + req->service() + "' (known: \"\", " + kInferenceService + ")");
    resp->set_status(Status());
    return grpc::Status::OK;
  }

  grpc::Status Watch(grpc::ServerContext* ctx, const ::grpc::health::v1::HealthCheckRequest* req,
                     grpc::ServerWriter<Response>* writer) override {
    if (watches_.fetch_add(1) >= kMaxWatches) {
      watches_.fetch_sub(1);
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "too many health watches at once (" + std::to_string(kMaxWatches) + ")");
    }
    const bool known = Known(req->service());
    Response::ServingStatus last = Response::UNKNOWN;
    bool first = true;
    while (!ctx->IsCancelled() && !stopping_.load()) {
      Response::ServingStatus now = known ? Status() : Response::SERVICE_UNKNOWN;
      if (first || now != last) {
        Response r;
        r.set_status(now);
        if (!writer->Write(r)) break;
        last = now;
        first = false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(kWatchPollMs));
    }
    watches_.fetch_sub(1);
    return grpc::Status::OK;
  }

  // Ends every Watch stream (before the server shuts down).
  void Stop() { stopping_ = true; }

 private:
  static constexpr const char* kInferenceService = "inference.GRPCInferenceService";
  static bool Known(const std::string& name) { return name.empty() || name == kInferenceService; }
  Response::ServingStatus Status() const {
    return service_->Ready() ? Response::SERVING : Response::NOT_SERVING;
  }

  serve::Service* service_;
  std::atomic<int> watches_{0};
  std::atomic<bool> stopping_{false};
};

class GrpcServerImpl final : public GrpcServer {
 public:
  GrpcServerImpl(std::unique_ptr<InferenceService> handlers, std::unique_ptr<HealthService> health,
                 std::unique_ptr<grpc::Server> server, int port)
      : handlers_(std::move(handlers)),
        health_(std::move(health)),
        server_(std::move(server)),
        port_(port) {}
  ~GrpcServerImpl() override { Shutdown(0); }

  int port() const override { return port_; }

  void Shutdown(int deadline_ms) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!server_) return;
    health_->Stop();
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(std::max(deadline_ms, 0)));
    server_->Wait();
    server_.reset();
  }

 private:
  std::mutex mu_;
  std::unique_ptr<InferenceService> handlers_;  // outlives server_
  std::unique_ptr<HealthService> health_;       // outlives server_
  std::unique_ptr<grpc::Server> server_;
  int port_;
};

void DropGrpcLog(gpr_log_func_args*) {}

// protobuf logs one line per message it cannot parse (a string field that is not UTF-8, in
// every such request a client sends): at most one line per second reaches stderr, with the
// count of the lines dropped before it, so a hostile client cannot flood the log.
void RateLimitedProtobufLog(google::protobuf::LogLevel level, const char* filename, int line,
                            const std::string& message) {
  static std::mutex mu;
  static std::chrono::steady_clock::time_point last{};
  static uint64_t dropped = 0;
  std::lock_guard<std::mutex> lock(mu);
  auto now = std::chrono::steady_clock::now();
  if (level < google::protobuf::LOGLEVEL_FATAL && now - last < std::chrono::seconds(1)) {
    ++dropped;
    return;
  }
  last = now;
  std::fprintf(stderr, "[libprotobuf %s:%d] %s%s\n", filename, line, message.c_str(),
               dropped ? (" (" + std::to_string(dropped) + " similar lines dropped)").c_str() : "");
  dropped = 0;
}

}  // namespace

Result<std::unique_ptr<GrpcServer>> StartGrpcServer(Service* service, const GrpcOptions& options) {
  // gRPC's own log lines (a failed bind is a multi-line error dump) stay quiet unless the user
  // asks for them with GRPC_VERBOSITY; what failed is in the returned error.
  static std::once_flag quiet;
  std::call_once(quiet, [] {
    if (std::getenv("GRPC_VERBOSITY") == nullptr) gpr_set_log_function(DropGrpcLog);
    google::protobuf::SetLogHandler(RateLimitedProtobufLog);
  });
  auto handlers = std::make_unique<InferenceService>(service);
  auto health = std::make_unique<HealthService>(service);
  // Server reflection: grpcurl / grpc_cli can list and describe the services.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.address, grpc::InsecureServerCredentials(), &port);
  // gRPC sets SO_REUSEPORT by default: a second server would share a port already in use
  // instead of failing to bind.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  grpc::ResourceQuota quota("ferry-grpc");
  quota.SetMaxThreads(kMaxThreads);
  builder.SetResourceQuota(quota);
  // The synchronous server's handler threads: one that finishes a call keeps polling only while
  // fewer than MAX_POLLERS poll (gRPC's default 2), else it exits and the next call that finds
  // too few pollers starts a new thread. With more calls in flight than that (C >= 4 clients),
  // every call paid a thread exit and creation: p99 3-4 ms at C=4 against p50 0.35 ms
  // (bench/README.md, serving with the C++ generator). Idle pollers cost a blocked thread each.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, kMaxPollers);
  builder.RegisterService(handlers.get());
  builder.RegisterService(health.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    return InvalidError("gRPC: cannot listen on '{}' (address in use or not valid)",
                        options.address);
  }
  return std::unique_ptr<GrpcServer>(std::make_unique<GrpcServerImpl>(
      std::move(handlers), std::move(health), std::move(server), port));
}

}  // namespace ferry::serve

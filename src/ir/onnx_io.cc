#include "ir/onnx_io.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
// onnx_pb.h defines ONNX_API and must precede the other onnx headers (own include block, so
// clang-format's sorting keeps the order).
#include <onnx/onnx_pb.h>

#include <onnx/onnx-data.pb.h>

#include "core/memory_budget.h"
#include "core/npy.h"

namespace ferry::ir {

namespace fs = std::filesystem;

namespace {

struct ImportCtx {
  std::string base_dir;  // "" = external data refused
  std::string what;      // file name for messages
  // The parsed proto belongs to the importer: large raw_data buffers of top-level initializers
  // are moved into the tensors instead of copied (see GraphFromProto).
  bool take_raw = false;
};

// Reads the tensor's bytes from its external data file straight into a tensor of `dt` and `shape`
// (`want` bytes; only the range the tensor names is read: one file may hold every weight of a
// large model). Nothing is allocated before the file is known to hold the bytes.
Result<Tensor> ReadExternal(const onnx::TensorProto& tp, const ImportCtx& ctx, DType dt,
                            const Shape& shape, uint64_t want) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : tp.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = std::atoll(kv.value().c_str());
    else if (kv.key() == "length")
      length = std::atoll(kv.value().c_str());
  }
  if (location.empty())
    return InvalidError("{}: tensor '{}' has external data without a location", ctx.what,
                        tp.name());
  if (ctx.base_dir.empty())
    return InvalidError("{}: tensor '{}' refers to external data '{}' but the model has no folder",
                        ctx.what, tp.name(), location);
  fs::path loc(location);
  std::error_code ec;
  fs::path base = fs::weakly_canonical(fs::path(ctx.base_dir), ec);
  fs::path full = fs::weakly_canonical(base / loc, ec);
  auto rel = full.lexically_relative(base);
  if (loc.is_absolute() || rel.empty() || *rel.begin() == "..")
    return InvalidError("{}: tensor '{}': external data path '{}' leaves the model's folder",
                        ctx.what, tp.name(), location);
  const std::string fname = full.string();
  std::ifstream f(fname, std::ios::binary | std::ios::ate);
  if (!f)
    return InvalidError("{}: tensor '{}': cannot read external data '{}': {}", ctx.what, tp.name(),
                        location, std::strerror(errno));
  const int64_t file_size = static_cast<int64_t>(f.tellg());
  if (file_size < 0 || !fs::is_regular_file(full, ec))
    return InvalidError("{}: tensor '{}': external data '{}' is not a regular file", ctx.what,
                        tp.name(), location);
  if (offset < 0 || offset > file_size)
    return InvalidError("{}: tensor '{}': external data offset {} is past the end of '{}'",
                        ctx.what, tp.name(), offset, location);
  if (length < 0) length = file_size - offset;
  if (length > file_size - offset)
    return InvalidError(
        "{}: tensor '{}': external data '{}' is truncated ({} bytes at {}, file has {})", ctx.what,
        tp.name(), location, length, offset, file_size);
  if (static_cast<uint64_t>(length) != want)
    return InvalidError("{}: tensor '{}' of type {} and shape {} has {} raw bytes, expected {}",
                        ctx.what, tp.name(), DTypeName(dt), ShapeToString(shape), length, want);
  Tensor t = Tensor::Uninitialized(dt, shape);
  f.seekg(offset);
  f.read(static_cast<char*>(t.raw()), length);
  if (f.gcount() != length)
    return InvalidError("{}: tensor '{}': short read of external data '{}'", ctx.what, tp.name(),
                        location);
  return t;
}

// How many values of `dt` the typed (not raw) fields of `tp` hold.
int64_t TypedCount(const onnx::TensorProto& tp, DType dt) {
  switch (dt) {
    case DType::kString:
      return tp.string_data_size();
    case DType::kFloat:
      return tp.float_data_size();
    case DType::kDouble:
      return tp.double_data_size();
    case DType::kInt64:
      return tp.int64_data_size();
    case DType::kUint32:
    case DType::kUint64:
      return tp.uint64_data_size();
    default:
      return tp.int32_data_size();
  }
}

// `owned`: the same proto when the importer may take its raw_data buffer (no copy).
Result<Tensor> TensorFromProto(const onnx::TensorProto& tp, const ImportCtx& ctx,
                               onnx::TensorProto* owned = nullptr) {
  auto dt = DTypeFromCode(tp.data_type());
  std::string tname = tp.name().empty() ? std::string("<unnamed>") : tp.name();
  if (!dt)
    return UnsupportedError(
        "{}: tensor '{}' has element type code {}, which Ferry does not support", ctx.what, tname,
        tp.data_type());
  Shape shape(tp.dims().begin(), tp.dims().end());
  for (int64_t d : shape)
    if (d < 0) return InvalidError("{}: tensor '{}' has a negative dim {}", ctx.what, tname, d);
  // The declared size is checked against the data that is there before anything is allocated:
  // a tensor cannot claim more bytes than the file (or its external data) holds.
  uint64_t want = 0;
  if (!TensorBytesChecked(*dt, shape, &want))
    return InvalidError("{}: tensor '{}' of shape {} would hold more than 2^63 bytes", ctx.what,
                        tname, ShapeToString(shape));
  const bool external = tp.data_location() == onnx::TensorProto::EXTERNAL;
  if (*dt != DType::kString && (external || tp.has_raw_data())) {
    if (external) {
      FERRY_ASSIGN_OR_RETURN(Tensor t, ReadExternal(tp, ctx, *dt, shape, want));
      if (*dt == DType::kBool) NormalizeBoolBytes(t.raw(), t.size());
      return t;
    }
    const std::string& raw = tp.raw_data();
    if (raw.size() != want)
      return InvalidError("{}: tensor '{}' of type {} and shape {} has {} raw bytes, expected {}",
                          ctx.what, tname, DTypeName(*dt), ShapeToString(shape), raw.size(), want);
    // A large buffer aligned for its element type is moved into the tensor as it is.
    if (owned && ctx.take_raw && want >= 4096 &&
        reinterpret_cast<uintptr_t>(raw.data()) % 16 == 0) {
      std::shared_ptr<std::string> buf(owned->release_raw_data());
      void* data = buf->data();
      if (*dt == DType::kBool) NormalizeBoolBytes(data, static_cast<int64_t>(want));
      return Tensor::Adopt(*dt, std::move(shape), std::move(buf), data);
    }
    Tensor t = Tensor::Uninitialized(*dt, shape);
    if (want > 0) std::memcpy(t.raw(), raw.data(), want);
    if (*dt == DType::kBool) NormalizeBoolBytes(t.raw(), t.size());
    return t;
  }
  const int64_t n = NumElements(shape);  // no overflow: its bytes fit in 2^63
  auto size_error = [&](size_t got) {
    return InvalidError("{}: tensor '{}' of shape {} holds {} values, expected {}", ctx.what, tname,
                        ShapeToString(shape), got, n);
  };
  if (TypedCount(tp, *dt) != n) return size_error(static_cast<size_t>(TypedCount(tp, *dt)));
  Tensor t(*dt, shape);
  if (*dt == DType::kString) {
    if (tp.string_data_size() != n) return size_error(static_cast<size_t>(tp.string_data_size()));
    for (int64_t i = 0; i < n; ++i) t.data<std::string>()[i] = tp.string_data(static_cast<int>(i));
    return t;
  }
  switch (*dt) {
    case DType::kFloat:
      if (tp.float_data_size() != n) return size_error(static_cast<size_t>(tp.float_data_size()));
      std::copy(tp.float_data().begin(), tp.float_data().end(), t.data<float>());
      break;
    case DType::kDouble:
      if (tp.double_data_size() != n) return size_error(static_cast<size_t>(tp.double_data_size()));
      std::copy(tp.double_data().begin(), tp.double_data().end(), t.data<double>());
      break;
    case DType::kInt64:
      if (tp.int64_data_size() != n) return size_error(static_cast<size_t>(tp.int64_data_size()));
      std::copy(tp.int64_data().begin(), tp.int64_data().end(), t.data<int64_t>());
      break;
    case DType::kUint32:
    case DType::kUint64:
      if (tp.uint64_data_size() != n) return size_error(static_cast<size_t>(tp.uint64_data_size()));
      for (int64_t i = 0; i < n; ++i) {
        uint64_t v = tp.uint64_data(static_cast<int>(i));
        if (*dt == DType::kUint32)
          t.data<uint32_t>()[i] = static_cast<uint32_t>(v);
        else
          t.data<uint64_t>()[i] = v;
      }
      break;
    default: {  // int32_data carries int32, int16, int8, uint16, uint8, bool, float16, bfloat16
      if (tp.int32_data_size() != n) return size_error(static_cast<size_t>(tp.int32_data_size()));
      size_t es = DTypeSize(*dt);
      for (int64_t i = 0; i < n; ++i) {
        int32_t v = tp.int32_data(static_cast<int>(i));
        char* dst = static_cast<char*>(t.raw()) + static_cast<size_t>(i) * es;
        if (*dt == DType::kBool) {
          *reinterpret_cast<bool*>(dst) = v != 0;
        } else if (es == 1) {
          int8_t b = static_cast<int8_t>(v);
          std::memcpy(dst, &b, 1);
        } else if (es == 2) {
          uint16_t b = static_cast<uint16_t>(v);
          std::memcpy(dst, &b, 2);
        } else {
          std::memcpy(dst, &v, 4);
        }
      }
      break;
    }
  }
  return t;
}

// The dense tensor of a sparse one. kInvalid (naming the tensor) for dims that are negative or
// whose dense bytes pass the default memory budget (a sparse tensor holds little of what it
// declares: [-1] was a tensor of 2^64 - 1 elements read by the weights digest, SIGSEGV in
// `ferry inspect`; issue 19's black-box campaign), and for indices that are not [NNZ] or
// [NNZ, rank] of the values' NNZ.
Result<Tensor> SparseToDense(const onnx::SparseTensorProto& sp, const ImportCtx& ctx) {
  FERRY_ASSIGN_OR_RETURN(Tensor values, TensorFromProto(sp.values(), ctx));
  FERRY_ASSIGN_OR_RETURN(Tensor indices, TensorFromProto(sp.indices(), ctx));
  Shape shape(sp.dims().begin(), sp.dims().end());
  const std::string what = fmt::format("{}: sparse tensor '{}'", ctx.what, sp.values().name());
  FERRY_ASSIGN_OR_RETURN(uint64_t bytes, TensorBytes(values.dtype(), shape, what));
  if (bytes > DefaultMaxMemory())
    return InvalidError("{} of shape {} would take {} dense, over the memory budget ({} limit)",
                        what, ShapeToString(shape), FormatBytes(bytes),
                        FormatBytes(DefaultMaxMemory()));
  int64_t nnz = values.size();
  const bool linear = indices.rank() == 1 && indices.size() == nnz;
  const bool coords = indices.rank() == 2 && indices.dim(0) == nnz &&
                      indices.dim(1) == static_cast<int64_t>(shape.size());
  if (!linear && !coords)
    return InvalidError("{} has indices of shape {}, expected [{}] or [{}, {}]", what,
                        ShapeToString(indices.shape()), nnz, nnz, shape.size());
  Tensor dense(values.dtype(), shape);
  std::vector<int64_t> strides = Strides(shape);
  size_t es = DTypeSize(values.dtype());
  int64_t total = dense.size();
  for (int64_t k = 0; k < nnz; ++k) {
    int64_t off = 0;
    if (indices.rank() == 1) {
      off = indices.GetAsInt64(k);
    } else {
      for (size_t d = 0; d < shape.size(); ++d)
        off +=
            indices.GetAsInt64(k * static_cast<int64_t>(shape.size()) + static_cast<int64_t>(d)) *
            strides[d];
    }
    if (off < 0 || off >= total)
      return InvalidError("{}: sparse tensor '{}' has an index out of range", ctx.what,
                          sp.values().name());
    if (values.dtype() == DType::kString)
      dense.data<std::string>()[off] = values.data<std::string>()[k];
    else
      std::memcpy(static_cast<char*>(dense.raw()) + static_cast<size_t>(off) * es,
                  static_cast<const char*>(values.raw()) + static_cast<size_t>(k) * es, es);
  }
  return dense;
}

TypeInfo TypeFromProto(const onnx::TypeProto& tp) {
  TypeInfo t;
  switch (tp.value_case()) {
    case onnx::TypeProto::kTensorType:
    case onnx::TypeProto::kSparseTensorType: {
      const auto& tt = tp.value_case() == onnx::TypeProto::kTensorType ? tp.tensor_type()
                                                                       : onnx::TypeProto::Tensor();
      t.kind = TypeInfo::Kind::kTensor;
      int code = tp.value_case() == onnx::TypeProto::kTensorType
                     ? tt.elem_type()
                     : tp.sparse_tensor_type().elem_type();
      t.raw_elem_code = code;
      t.elem_type = DTypeFromCode(code).value_or(DType::kUndefined);
      if (tp.value_case() == onnx::TypeProto::kTensorType && tt.has_shape()) {
        std::vector<Dim> dims;
        for (const auto& d : tt.shape().dim()) {
          Dim dim;
          // A negative declared size (paddle2onnx writes -1) is a dynamic dim, as ONNX Runtime
          // reads it: no value, no name.
          if (d.has_dim_value() && d.dim_value() >= 0)
            dim.value = d.dim_value();
          else if (d.has_dim_param())
            dim.symbol = d.dim_param();
          dims.push_back(dim);
        }
        t.shape = std::move(dims);
      }
      break;
    }
    case onnx::TypeProto::kSequenceType:
      t.kind = TypeInfo::Kind::kSequence;
      t.inner = std::make_shared<TypeInfo>(TypeFromProto(tp.sequence_type().elem_type()));
      break;
    case onnx::TypeProto::kOptionalType:
      t.kind = TypeInfo::Kind::kOptional;
      t.inner = std::make_shared<TypeInfo>(TypeFromProto(tp.optional_type().elem_type()));
      break;
    case onnx::TypeProto::kMapType:
      t.kind = TypeInfo::Kind::kMap;
      t.key_type = DTypeFromCode(tp.map_type().key_type()).value_or(DType::kUndefined);
      if (tp.map_type().has_value_type())
        t.inner = std::make_shared<TypeInfo>(TypeFromProto(tp.map_type().value_type()));
      break;
    default:
      break;
  }
  return t;
}

ValueInfo ValueInfoFromProto(const onnx::ValueInfoProto& v) {
  ValueInfo vi;
  vi.name = v.name();
  vi.doc_string = v.doc_string();
  if (v.has_type()) vi.type = TypeFromProto(v.type());
  return vi;
}

Result<std::unique_ptr<Graph>> GraphFromProto(const onnx::GraphProto& gp, const ImportCtx& ctx);

Result<Attribute> AttrFromProto(const onnx::AttributeProto& ap, const ImportCtx& ctx) {
  Attribute a;
  a.name = ap.name();
  a.ref_attr_name = ap.ref_attr_name();
  a.doc_string = ap.doc_string();
  switch (ap.type()) {
    case onnx::AttributeProto::FLOAT:
      a.type = AttrType::kFloat;
      a.f = ap.f();
      break;
    case onnx::AttributeProto::INT:
      a.type = AttrType::kInt;
      a.i = ap.i();
      break;
    case onnx::AttributeProto::STRING:
      a.type = AttrType::kString;
      a.s = ap.s();
      break;
    case onnx::AttributeProto::TENSOR: {
      a.type = AttrType::kTensor;
      FERRY_ASSIGN_OR_RETURN(a.t, TensorFromProto(ap.t(), ctx));
      break;
    }
    case onnx::AttributeProto::SPARSE_TENSOR: {
      a.type = AttrType::kSparseTensor;
      FERRY_ASSIGN_OR_RETURN(a.t, SparseToDense(ap.sparse_tensor(), ctx));
      break;
    }
    case onnx::AttributeProto::GRAPH: {
      a.type = AttrType::kGraph;
      FERRY_ASSIGN_OR_RETURN(a.g, GraphFromProto(ap.g(), ctx));
      break;
    }
    case onnx::AttributeProto::FLOATS:
      a.type = AttrType::kFloats;
      a.floats.assign(ap.floats().begin(), ap.floats().end());
      break;
    case onnx::AttributeProto::INTS:
      a.type = AttrType::kInts;
      a.ints.assign(ap.ints().begin(), ap.ints().end());
      break;
    case onnx::AttributeProto::STRINGS:
      a.type = AttrType::kStrings;
      a.strings.assign(ap.strings().begin(), ap.strings().end());
      break;
    case onnx::AttributeProto::TENSORS:
      a.type = AttrType::kTensors;
      for (const auto& t : ap.tensors()) {
        FERRY_ASSIGN_OR_RETURN(Tensor x, TensorFromProto(t, ctx));
        a.tensors.push_back(std::move(x));
      }
      break;
    case onnx::AttributeProto::GRAPHS:
      a.type = AttrType::kGraphs;
      for (const auto& g : ap.graphs()) {
        FERRY_ASSIGN_OR_RETURN(auto x, GraphFromProto(g, ctx));
        a.graphs.push_back(std::move(x));
      }
      break;
    case onnx::AttributeProto::TYPE_PROTO:
      a.type = AttrType::kTypeProto;
      a.tp = TypeFromProto(ap.tp());
      break;
    default:
      if (!ap.ref_attr_name().empty()) break;
      return UnsupportedError("{}: attribute '{}' has unsupported type {}", ctx.what, ap.name(),
                              static_cast<int>(ap.type()));
  }
  return a;
}

Result<std::unique_ptr<Graph>> GraphFromProto(const onnx::GraphProto& gp, const ImportCtx& ctx) {
  auto g = std::make_unique<Graph>();
  g->name = gp.name();
  g->doc_string = gp.doc_string();
  for (const auto& v : gp.input()) g->inputs.push_back(ValueInfoFromProto(v));
  for (const auto& v : gp.output()) g->outputs.push_back(ValueInfoFromProto(v));
  for (const auto& v : gp.value_info()) g->value_info.push_back(ValueInfoFromProto(v));
  for (const auto& tp : gp.initializer()) {
    // With ctx.take_raw the proto is the importer's own, non-const object (ParseModelBytes).
    auto* owned = ctx.take_raw ? const_cast<onnx::TensorProto*>(&tp) : nullptr;
    FERRY_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(tp, ctx, owned));
    g->initializers.push_back({tp.name(), std::move(t), tp.doc_string()});
  }
  for (const auto& sp : gp.sparse_initializer()) {
    FERRY_ASSIGN_OR_RETURN(Tensor t, SparseToDense(sp, ctx));
    g->initializers.push_back({sp.values().name(), std::move(t), ""});
  }
  for (const auto& np : gp.node()) {
    Node n;
    n.name = np.name();
    n.op_type = np.op_type();
    n.domain = np.domain() == "ai.onnx" ? std::string() : np.domain();
    n.doc_string = np.doc_string();
    n.inputs.assign(np.input().begin(), np.input().end());
    n.outputs.assign(np.output().begin(), np.output().end());
    for (const auto& ap : np.attribute()) {
      auto a = AttrFromProto(ap, ctx);
      if (!a.ok()) return a.status().With(fmt::format("node {}", n.Describe()));
      n.attributes.push_back(std::move(a).value());
    }
    g->nodes.push_back(std::move(n));
  }
  return g;
}

// ---- export ----

void TensorToProto(const Tensor& t, const std::string& name, onnx::TensorProto* tp) {
  tp->set_name(name);
  tp->set_data_type(static_cast<int>(t.dtype()));
  for (int64_t d : t.shape()) tp->add_dims(d);
  if (t.dtype() == DType::kString) {
    for (int64_t i = 0; i < t.size(); ++i) tp->add_string_data(t.data<std::string>()[i]);
  } else {
    tp->set_raw_data(std::string(static_cast<const char*>(t.raw()), t.nbytes()));
  }
}

void TypeToProto(const TypeInfo& t, onnx::TypeProto* tp) {
  switch (t.kind) {
    case TypeInfo::Kind::kTensor: {
      auto* tt = tp->mutable_tensor_type();
      tt->set_elem_type(t.elem_type == DType::kUndefined ? t.raw_elem_code
                                                         : static_cast<int>(t.elem_type));
      if (t.shape) {
        auto* sh = tt->mutable_shape();
        for (const Dim& d : *t.shape) {
          auto* dp = sh->add_dim();
          if (d.value)
            dp->set_dim_value(*d.value);
          else if (!d.symbol.empty())
            dp->set_dim_param(d.symbol);
        }
      }
      break;
    }
    case TypeInfo::Kind::kSequence:
      if (t.inner)
        TypeToProto(*t.inner, tp->mutable_sequence_type()->mutable_elem_type());
      else
        tp->mutable_sequence_type();
      break;
    case TypeInfo::Kind::kOptional:
      if (t.inner)
        TypeToProto(*t.inner, tp->mutable_optional_type()->mutable_elem_type());
      else
        tp->mutable_optional_type();
      break;
    case TypeInfo::Kind::kMap: {
      auto* mt = tp->mutable_map_type();
      if (t.key_type != DType::kUndefined) mt->set_key_type(static_cast<int>(t.key_type));
      if (t.inner) TypeToProto(*t.inner, mt->mutable_value_type());
      break;
    }
    default:
      break;
  }
}

void ValueInfoToProto(const ValueInfo& v, onnx::ValueInfoProto* vp) {
  vp->set_name(v.name);
  if (!v.doc_string.empty()) vp->set_doc_string(v.doc_string);
  if (v.type.kind != TypeInfo::Kind::kUnknown) TypeToProto(v.type, vp->mutable_type());
}

void GraphToProto(const Graph& g, onnx::GraphProto* gp);

void AttrToProto(const Attribute& a, onnx::AttributeProto* ap) {
  ap->set_name(a.name);
  if (!a.ref_attr_name.empty()) ap->set_ref_attr_name(a.ref_attr_name);
  if (!a.doc_string.empty()) ap->set_doc_string(a.doc_string);
  switch (a.type) {
    case AttrType::kFloat:
      ap->set_type(onnx::AttributeProto::FLOAT);
      ap->set_f(a.f);
      break;
    case AttrType::kInt:
      ap->set_type(onnx::AttributeProto::INT);
      ap->set_i(a.i);
      break;
    case AttrType::kString:
      ap->set_type(onnx::AttributeProto::STRING);
      ap->set_s(a.s);
      break;
    case AttrType::kTensor:
      ap->set_type(onnx::AttributeProto::TENSOR);
      TensorToProto(a.t, "", ap->mutable_t());
      break;
    case AttrType::kSparseTensor: {
      // Written back as a sparse tensor holding every element (indices in linear form).
      ap->set_type(onnx::AttributeProto::SPARSE_TENSOR);
      auto* sp = ap->mutable_sparse_tensor();
      for (int64_t d : a.t.shape()) sp->add_dims(d);
      TensorToProto(a.t.Reshaped({a.t.size()}), "", sp->mutable_values());
      Tensor idx(DType::kInt64, {a.t.size()});
      for (int64_t i = 0; i < a.t.size(); ++i) idx.data<int64_t>()[i] = i;
      TensorToProto(idx, "", sp->mutable_indices());
      break;
    }
    case AttrType::kGraph:
      ap->set_type(onnx::AttributeProto::GRAPH);
      GraphToProto(*a.g, ap->mutable_g());
      break;
    case AttrType::kFloats:
      ap->set_type(onnx::AttributeProto::FLOATS);
      for (float f : a.floats) ap->add_floats(f);
      break;
    case AttrType::kInts:
      ap->set_type(onnx::AttributeProto::INTS);
      for (int64_t i : a.ints) ap->add_ints(i);
      break;
    case AttrType::kStrings:
      ap->set_type(onnx::AttributeProto::STRINGS);
      for (const auto& s : a.strings) ap->add_strings(s);
      break;
    case AttrType::kTensors:
      ap->set_type(onnx::AttributeProto::TENSORS);
      for (const auto& t : a.tensors) TensorToProto(t, "", ap->add_tensors());
      break;
    case AttrType::kGraphs:
      ap->set_type(onnx::AttributeProto::GRAPHS);
      for (const auto& g : a.graphs) GraphToProto(*g, ap->add_graphs());
      break;
    case AttrType::kTypeProto:
      ap->set_type(onnx::AttributeProto::TYPE_PROTO);
      TypeToProto(a.tp, ap->mutable_tp());
      break;
    default:
      break;
  }
}

void GraphToProto(const Graph& g, onnx::GraphProto* gp) {
  gp->set_name(g.name);
  if (!g.doc_string.empty()) gp->set_doc_string(g.doc_string);
  for (const auto& n : g.nodes) {
    auto* np = gp->add_node();
    if (!n.name.empty()) np->set_name(n.name);
    np->set_op_type(n.op_type);
    if (!n.domain.empty()) np->set_domain(n.domain);
    if (!n.doc_string.empty()) np->set_doc_string(n.doc_string);
    for (const auto& i : n.inputs) np->add_input(i);
    for (const auto& o : n.outputs) np->add_output(o);
    for (const auto& a : n.attributes) AttrToProto(a, np->add_attribute());
  }
  for (const auto& i : g.initializers) {
    TensorToProto(i.tensor, i.name, gp->add_initializer());
    if (!i.doc_string.empty())
      gp->mutable_initializer(gp->initializer_size() - 1)->set_doc_string(i.doc_string);
  }
  for (const auto& v : g.inputs) ValueInfoToProto(v, gp->add_input());
  for (const auto& v : g.outputs) ValueInfoToProto(v, gp->add_output());
  for (const auto& v : g.value_info) ValueInfoToProto(v, gp->add_value_info());
}

}  // namespace

namespace {

// Model-local functions call each other by (domain, name); ONNX forbids recursion, and tools
// that expand calls (libonnx's shape inference, inliners) would recurse without end on it.
constexpr int kMaxFunctionDepth = 32;

void CollectCalls(const onnx::NodeProto& n, std::vector<std::string>* calls) {
  calls->push_back(n.domain() + ":" + n.op_type());
  for (const auto& a : n.attribute()) {
    if (a.has_g())
      for (const auto& m : a.g().node()) CollectCalls(m, calls);
    for (const auto& g : a.graphs())
      for (const auto& m : g.node()) CollectCalls(m, calls);
  }
}

// kInvalid naming the function for two functions of one name, a call cycle (recursion) or a
// chain of calls deeper than kMaxFunctionDepth.
Status CheckFunctions(const onnx::ModelProto& mp, const std::string& what) {
  std::map<std::string, int> index;
  for (int i = 0; i < mp.functions_size(); ++i) {
    const std::string key = mp.functions(i).domain() + ":" + mp.functions(i).name();
    if (!index.emplace(key, i).second)
      return InvalidError("{}: function '{}' is defined twice", what, key);
  }
  std::vector<std::vector<int>> callees(index.size());
  for (int i = 0; i < mp.functions_size(); ++i) {
    std::vector<std::string> calls;
    for (const auto& n : mp.functions(i).node()) CollectCalls(n, &calls);
    for (const auto& c : calls) {
      auto it = index.find(c);
      if (it != index.end()) callees[static_cast<size_t>(i)].push_back(it->second);
    }
  }
  // Depth-first over the call graph: 0 unseen, 1 on the current path, 2 done (with its depth).
  std::vector<int> state(index.size(), 0), depth(index.size(), 0);
  std::vector<int> path;
  std::function<Status(int)> visit = [&](int f) -> Status {
    const auto name = [&](int k) {
      return mp.functions(k).domain() + ":" + mp.functions(k).name();
    };
    state[static_cast<size_t>(f)] = 1;
    path.push_back(f);
    if (static_cast<int>(path.size()) > kMaxFunctionDepth)
      return InvalidError("{}: function calls nest deeper than {} (from '{}')", what,
                          kMaxFunctionDepth, name(path.front()));
    int deepest = 0;
    for (int g : callees[static_cast<size_t>(f)]) {
      if (state[static_cast<size_t>(g)] == 1) {
        std::string cycle;
        for (auto it = std::find(path.begin(), path.end(), g); it != path.end(); ++it)
          cycle += "'" + name(*it) + "' -> ";
        return InvalidError("{}: function '{}' calls itself ({}'{}'): recursion is not allowed",
                            what, name(g), cycle, name(g));
      }
      if (state[static_cast<size_t>(g)] == 0) FERRY_RETURN_IF_ERROR(visit(g));
      deepest = std::max(deepest, depth[static_cast<size_t>(g)]);
    }
    depth[static_cast<size_t>(f)] = deepest + 1;
    if (deepest + 1 > kMaxFunctionDepth)
      return InvalidError("{}: function calls nest deeper than {} (from '{}')", what,
                          kMaxFunctionDepth, name(f));
    state[static_cast<size_t>(f)] = 2;
    path.pop_back();
    return Status::Ok();
  };
  for (int i = 0; i < mp.functions_size(); ++i)
    if (state[static_cast<size_t>(i)] == 0) FERRY_RETURN_IF_ERROR(visit(i));
  return Status::Ok();
}

// `fill`, when given, runs on the parsed proto before it is imported (LoadModel reads the large
// raw_data buffers SplitLargeRawData left out of `bytes` with it).
Result<std::unique_ptr<Model>> ParseModelBytes(
    const void* bytes, size_t size, const std::string& base_dir, const std::string& what,
    const std::function<Status(onnx::ModelProto&)>& fill = nullptr) {
  onnx::ModelProto mp;
  if (size == 0) return InvalidError("{}: the file is empty, not an ONNX model", what);
  if (size > static_cast<size_t>(std::numeric_limits<int>::max()))
    return InvalidError(
        "{}: {} bytes is over protobuf's 2 GiB limit for one model file (store the weights as "
        "external data)",
        what, size);
  if (!mp.ParseFromArray(bytes, static_cast<int>(size)))
    return InvalidError(
        "{}: not a valid ONNX model (protobuf parse failed: truncated or corrupt file)", what);
  if (fill) FERRY_RETURN_IF_ERROR(fill(mp));
  if (!mp.has_graph() || mp.opset_import_size() == 0 || mp.ir_version() <= 0)
    return InvalidError("{}: not a valid ONNX model (missing graph, ir_version or opset_import)",
                        what);
  FERRY_RETURN_IF_ERROR(CheckFunctions(mp, what));
  ImportCtx ctx{base_dir, what, /*take_raw=*/true};
  auto m = std::make_unique<Model>();
  m->ir_version = mp.ir_version();
  for (const auto& o : mp.opset_import())
    m->opset_imports.push_back({o.domain() == "ai.onnx" ? std::string() : o.domain(), o.version()});
  m->producer_name = mp.producer_name();
  m->producer_version = mp.producer_version();
  m->domain = mp.domain();
  m->model_version = mp.model_version();
  m->doc_string = mp.doc_string();
  for (const auto& kv : mp.metadata_props()) m->metadata.emplace_back(kv.key(), kv.value());
  for (const auto& f : mp.functions()) {
    m->functions_serialized.push_back(f.SerializeAsString());
    m->function_names.push_back(f.domain() + ":" + f.name());
  }
  FERRY_ASSIGN_OR_RETURN(auto g, GraphFromProto(mp.graph(), ctx));
  m->graph = std::move(*g);
  return m;
}

// A read-only private mapping of a whole open file (page-cache backed: reading it faults no
// anonymous memory); empty when the file cannot be mapped.
class MappedFile {
 public:
  MappedFile(int fd, size_t size) {
    if (size == 0) return;
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
      data_ = p;
      size_ = size;
    }
  }
  ~MappedFile() {
    if (data_) ::munmap(data_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// ---- Loading without the whole file resident beside the parsed weights ----
// Parsing the mapped file with protobuf copies every raw_data into the proto while the file's
// pages stay mapped: the load peaked at twice the weights (VGG-11, 531 MB: 1049 MB). Instead the
// file's wire format is walked (ModelProto.graph -> GraphProto.initializer -> TensorProto
// .raw_data) and copied without the large raw_data payloads; protobuf parses that, and each
// payload is then read from the file (pread: through the page cache, never mapped) straight
// into its tensor's buffer. Anything the walker does not expect (groups, a malformed varint, a
// length past the end) makes it give up and the whole file is parsed as before, so a corrupt
// file gets protobuf's own error.

constexpr uint64_t kLargeRaw = 64 * 1024;  // raw_data payloads at least this long are read apart

struct LargeRaw {
  int initializer;          // index in GraphProto.initializer
  uint64_t offset, length;  // the payload's bytes in the file
};

bool ReadVarint(const uint8_t*& p, const uint8_t* end, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    const uint8_t b = *p++;
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// One field at p: its number, wire type, and for wire type 2 the payload; p moves past it.
struct WireField {
  uint64_t number = 0, type = 0;
  const uint8_t* payload = nullptr;
  uint64_t length = 0;
};

bool NextField(const uint8_t*& p, const uint8_t* end, WireField* f) {
  uint64_t tag;
  if (!ReadVarint(p, end, &tag)) return false;
  f->number = tag >> 3;
  f->type = tag & 7;
  uint64_t v;
  switch (f->type) {
    case 0:
      return ReadVarint(p, end, &v);
    case 1:
      if (end - p < 8) return false;
      p += 8;
      return true;
    case 5:
      if (end - p < 4) return false;
      p += 4;
      return true;
    case 2:
      if (!ReadVarint(p, end, &f->length) || f->length > static_cast<uint64_t>(end - p))
        return false;
      f->payload = p;
      p += f->length;
      return true;
    default:  // groups (3, 4) and invalid types
      return false;
  }
}

void PutMessage(std::string* out, uint64_t number, const std::string& body) {
  PutVarint(out, number << 3 | 2);
  PutVarint(out, body.size());
  *out += body;
}

// Copies the message [b, e) to `out` field by field. A length-delimited field numbered `number`
// goes to `edit(field, out)` instead, which writes what replaces it and returns false to give up
// (or, with `copy` left true, has the field copied as it is). False when the walk meets
// something it does not expect.
template <typename Edit>
bool RewriteField(const uint8_t* b, const uint8_t* e, uint64_t number, std::string* out,
                  Edit&& edit) {
  for (const uint8_t* p = b; p < e;) {
    const uint8_t* start = p;
    WireField f;
    if (!NextField(p, e, &f)) return false;
    bool copy = true;
    if (f.number == number && f.type == 2 && !edit(f, out, &copy)) return false;
    if (copy) out->append(reinterpret_cast<const char*>(start), static_cast<size_t>(p - start));
  }
  return true;
}

// A nested message field: its payload rewritten by `body`, written back with its new length.
template <typename Body>
auto Nested(uint64_t number, Body&& body) {
  return [number, body](const WireField& f, std::string* out, bool* copy) {
    std::string inner;
    if (!body(f.payload, f.payload + f.length, &inner)) return false;
    PutMessage(out, number, inner);
    *copy = false;
    return true;
  };
}

// The ModelProto in [file, file + size) without its initializers' (ModelProto.graph 7 ->
// GraphProto.initializer 5 -> TensorProto.raw_data 9) raw_data payloads of kLargeRaw bytes or
// more: an empty raw_data written instead, the payload recorded in `large`.
bool SplitLargeRawData(const uint8_t* file, size_t size, std::string* out,
                       std::vector<LargeRaw>* large) {
  int index = 0;  // of the initializer being walked
  auto tensor = [&](const uint8_t* b, const uint8_t* e, std::string* o) {
    const int self = index++;
    return RewriteField(b, e, 9, o, [&](const WireField& f, std::string* to, bool* copy) {
      if (f.length < kLargeRaw) return true;
      PutMessage(to, 9, std::string());
      large->push_back({self, static_cast<uint64_t>(f.payload - file), f.length});
      *copy = false;
      return true;
    });
  };
  auto graph = [&](const uint8_t* b, const uint8_t* e, std::string* o) {
    return RewriteField(b, e, 5, o, Nested(5, tensor));
  };
  return RewriteField(file, file + size, 7, out, Nested(7, graph));
}

thread_local int t_large_raw_read = 0;

// Reads the left-out payloads from the file into their initializers' raw_data.
Status ReadLargeRaw(int fd, const std::vector<LargeRaw>& large, onnx::ModelProto& mp,
                    const std::string& what) {
  for (const LargeRaw& r : large) {
    if (!mp.has_graph() || r.initializer >= mp.graph().initializer_size())
      return InvalidError("{}: not a valid ONNX model (initializer {} went missing)", what,
                          r.initializer);
    std::string* raw = mp.mutable_graph()->mutable_initializer(r.initializer)->mutable_raw_data();
    raw->resize(static_cast<size_t>(r.length));
    uint64_t done = 0;
    while (done < r.length) {
      const ssize_t n = ::pread(fd, raw->data() + done, static_cast<size_t>(r.length - done),
                                static_cast<off_t>(r.offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        return InvalidError("{}: cannot read {} bytes of tensor data at offset {}: {}", what,
                            r.length, r.offset, n < 0 ? std::strerror(errno) : "file truncated");
      done += static_cast<uint64_t>(n);
    }
    ++t_large_raw_read;
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Model>> ParseModel(const std::string& bytes, const std::string& base_dir,
                                          const std::string& what) {
  return ParseModelBytes(bytes.data(), bytes.size(), base_dir, what);
}

int LargeRawReadForTesting() {
  return t_large_raw_read;
}

Result<std::unique_ptr<Model>> LoadModel(const std::string& path) {
  t_large_raw_read = 0;
  std::error_code ec;
  if (!fs::exists(path, ec)) return InvalidError("model file '{}' does not exist", path);
  if (fs::is_directory(path, ec))
    return InvalidError("model path '{}' is a directory, not an .onnx file", path);
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd >= 0 && ::fstat(fd, &st) == 0 && st.st_size > 0) {
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    MappedFile mapped(fd, static_cast<size_t>(st.st_size));
    if (mapped.data()) {
      const auto* file = static_cast<const uint8_t*>(mapped.data());
      std::string small;
      std::vector<LargeRaw> large;
      if (SplitLargeRawData(file, mapped.size(), &small, &large) && !large.empty())
        return ParseModelBytes(small.data(), small.size(), dir, path, [&](onnx::ModelProto& mp) {
          return ReadLargeRaw(fd, large, mp, path);
        });
      return ParseModelBytes(mapped.data(), mapped.size(), dir, path);
    }
  } else if (fd >= 0) {
    ::close(fd);
  }
  FERRY_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
  return ParseModel(bytes, dir, path);
}

namespace {

void ModelToProto(const Model& m, onnx::ModelProto* mp) {
  mp->set_ir_version(m.ir_version);
  for (const auto& o : m.opset_imports) {
    auto* op = mp->add_opset_import();
    op->set_domain(o.domain);
    op->set_version(o.version);
  }
  if (!m.producer_name.empty()) mp->set_producer_name(m.producer_name);
  if (!m.producer_version.empty()) mp->set_producer_version(m.producer_version);
  if (!m.domain.empty()) mp->set_domain(m.domain);
  if (m.model_version) mp->set_model_version(m.model_version);
  if (!m.doc_string.empty()) mp->set_doc_string(m.doc_string);
  for (const auto& [k, v] : m.metadata) {
    auto* kv = mp->add_metadata_props();
    kv->set_key(k);
    kv->set_value(v);
  }
  for (const auto& f : m.functions_serialized) mp->add_functions()->ParseFromString(f);
  GraphToProto(m.graph, mp->mutable_graph());
}

std::string SerializeProto(const onnx::ModelProto& mp) {
  std::string out;
  google::protobuf::io::StringOutputStream sos(&out);
  google::protobuf::io::CodedOutputStream cos(&sos);
  cos.SetSerializationDeterministic(true);
  mp.SerializeToCodedStream(&cos);
  cos.Trim();
  return out;
}

}  // namespace

std::string SerializeModel(const Model& m) {
  onnx::ModelProto mp;
  ModelToProto(m, &mp);
  return SerializeProto(mp);
}

Status SaveModel(const Model& m, const std::string& path) {
  // Protobuf cannot hold a message of 2 GiB or more: keep 64 MiB for the graph itself.
  return SaveModel(m, path, (size_t{2} << 30) - (size_t{64} << 20));
}

Status SaveModel(const Model& m, const std::string& path, size_t external_threshold) {
  onnx::ModelProto mp;
  ModelToProto(m, &mp);
  size_t total = 0;
  for (const auto& init : mp.graph().initializer()) total += init.raw_data().size();
  if (total <= external_threshold) return WriteFileAtomic(path, SerializeProto(mp));
  // Large weights go to `<model file name>.data` beside the model (ONNX external data).
  const std::string location = fs::path(path).filename().string() + ".data";
  const std::string data_path = (fs::path(path).parent_path() / location).string();
  std::string data;
  for (auto& init : *mp.mutable_graph()->mutable_initializer()) {
    if (init.raw_data().size() < 1024) continue;
    while (data.size() % 64) data.push_back('\0');  // aligned, as mmap-based loaders like
    const size_t offset = data.size(), length = init.raw_data().size();
    data += init.raw_data();
    init.clear_raw_data();
    init.set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [&](const char* k, const std::string& v) {
      auto* e = init.add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    add("location", location);
    add("offset", std::to_string(offset));
    add("length", std::to_string(length));
  }
  FERRY_RETURN_IF_ERROR(WriteFileAtomic(data_path, data));
  return WriteFileAtomic(path, SerializeProto(mp));
}

Result<Tensor> ParseTensorProto(const std::string& bytes, const std::string& what) {
  onnx::TensorProto tp;
  if (!tp.ParseFromString(bytes))
    return InvalidError("'{}' is not a valid TensorProto .pb file", what);
  ImportCtx ctx{"", what};
  return TensorFromProto(tp, ctx);
}

Result<Tensor> ReadTensorPb(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
  return ParseTensorProto(bytes, path);
}

std::string TensorPbName(const std::string& path) {
  auto bytes = ReadFileBytes(path);
  if (!bytes.ok()) return "";
  onnx::TensorProto tp;
  if (!tp.ParseFromString(bytes.value())) return "";
  return tp.name();
}

std::string SerializeTensorProto(const Tensor& t, const std::string& name) {
  onnx::TensorProto tp;
  TensorToProto(t, name, &tp);
  return tp.SerializeAsString();
}

namespace {
Result<Value> ValueFromSequence(const onnx::SequenceProto& sp, const ImportCtx& ctx) {
  std::vector<Tensor> items;
  for (const auto& t : sp.tensor_values()) {
    FERRY_ASSIGN_OR_RETURN(Tensor x, TensorFromProto(t, ctx));
    items.push_back(std::move(x));
  }
  DType et = DTypeFromCode(sp.elem_type()).value_or(DType::kUndefined);
  if (!items.empty()) et = items[0].dtype();
  return Value::Sequence(std::move(items), et);
}
}  // namespace

Result<Value> ReadValuePb(const std::string& path, const TypeInfo& type) {
  FERRY_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
  ImportCtx ctx{"", path};
  if (type.kind == TypeInfo::Kind::kSequence) {
    onnx::SequenceProto sp;
    if (!sp.ParseFromString(bytes))
      return InvalidError("'{}' is not a valid SequenceProto .pb file", path);
    return ValueFromSequence(sp, ctx);
  }
  if (type.kind == TypeInfo::Kind::kOptional) {
    onnx::OptionalProto op;
    if (op.ParseFromString(bytes) && op.elem_type() != onnx::OptionalProto::UNDEFINED) {
      if (op.has_tensor_value()) {
        FERRY_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(op.tensor_value(), ctx));
        return Value(std::move(t));
      }
      if (op.has_sequence_value()) return ValueFromSequence(op.sequence_value(), ctx);
      return Value();
    }
    if (op.ParseFromString(bytes) && !op.has_tensor_value() && !op.has_sequence_value() &&
        bytes.size() < 64 && op.elem_type() == onnx::OptionalProto::UNDEFINED && !op.name().empty())
      return Value();
  }
  FERRY_ASSIGN_OR_RETURN(Tensor t, ParseTensorProto(bytes, path));
  return Value(std::move(t));
}

}  // namespace ferry::ir

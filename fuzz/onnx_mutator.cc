#include "onnx_mutator.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace ferry::fuzz {

namespace {

using google::protobuf::RepeatedPtrField;
using onnx::AttributeProto;
using onnx::FunctionProto;
using onnx::GraphProto;
using onnx::ModelProto;
using onnx::NodeProto;
using onnx::TensorProto;
using onnx::TypeProto;
using onnx::ValueInfoProto;

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

// Values that break arithmetic: zero, signs, powers of two at type edges, 2^40.
// clang-format off
const int64_t kInts[] = {
    0, 1, -1, 2, 3, -2, 4, 7, 16, 64, 255, 256, 1 << 16, 1 << 20, INT32_MAX, INT32_MIN, 1LL << 32,
    1LL << 40, -(1LL << 40), kI64Max, kI64Min, kI64Max / 2};
const float kFloats[] = {
    0.f, -0.f, 1.f, -1.f, 0.5f, 2.f, 1e-45f, 1e30f, -1e30f, std::numeric_limits<float>::max(),
    std::numeric_limits<float>::min(), std::numeric_limits<float>::infinity(),
    -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
const char* const kStrings[] = {
    "", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "constant", "reflect", "edge", "wrap",
    "linear", "nearest", "cubic", "half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
    "tf_crop_and_resize", "round_prefer_floor", "floor", "ceil", "DCR", "CRD", "forward", "reverse",
    "bidirectional", "Tanh", "Sigmoid", "Relu", "none", "tanh", "mean", "sum", "max", "min", "add",
    "mul", "\xff\xfe\x00x", "../../../../etc/passwd"};
const char* const kAttrNames[] = {
    "axis", "axes", "kernel_shape", "strides", "pads", "dilations", "group", "perm", "keepdims",
    "mode", "auto_pad", "alpha", "beta", "gamma", "transA", "transB", "to", "value", "epsilon",
    "split", "starts", "ends", "shape", "direction", "hidden_size", "activations", "blocksize",
    "count_include_pad", "ceil_mode", "storage_order", "output_padding", "output_shape",
    "coordinate_transformation_mode", "exclude_outside", "extrapolation_value", "nearest_mode",
    "cubic_coeff_a", "largest", "sorted", "k", "num_outputs", "allowzero", "batch_dims",
    "reduction", "noop_with_empty_axes", "select_last_index", "exclusive", "seed", "dtype", "high",
    "low", "mean", "scale", "sample_size", "size", "bias", "lambd", "fmod", "center_point_box",
    "then_branch", "else_branch", "body", "value_float", "value_floats", "value_int", "value_ints",
    "value_string", "sparse_value", "layout", "input_forget", "clip", "linear_before_reset",
    "saturate", "stash_type", "training_mode", "momentum", "spatial", "broadcast",
    "consumed_inputs", "num_scan_inputs", "scan_input_axes", "scan_output_axes", "block_size",
    "output_dtype"};
const char* const kOps[] = {
    "Abs", "Acos", "Add", "And", "ArgMax", "ArgMin", "AveragePool", "BatchNormalization",
    "BitShift", "Cast", "CastLike", "Ceil", "Celu", "Clip", "Compress", "Concat",
    "ConcatFromSequence", "Constant", "ConstantOfShape", "Conv", "ConvInteger", "ConvTranspose",
    "Cos", "CumSum", "DepthToSpace", "DequantizeLinear", "Div", "Dropout", "DynamicQuantizeLinear",
    "Einsum", "Elu", "Equal", "Erf", "Exp", "Expand", "EyeLike", "Flatten", "Floor", "GRU",
    "Gather", "GatherElements", "GatherND", "Gelu", "Gemm", "GlobalAveragePool", "GlobalMaxPool",
    "Greater", "GridSample", "GroupNormalization", "HardSigmoid", "HardSwish", "Hardmax",
    "Identity", "If", "InstanceNormalization", "IsInf", "IsNaN", "LRN", "LSTM",
    "LayerNormalization", "LeakyRelu", "Less", "Log", "LogSoftmax", "Loop", "LpNormalization",
    "MatMul", "MatMulInteger", "Max", "MaxPool", "MaxRoiPool", "MaxUnpool", "Mean", "Min", "Mod",
    "Mul", "Multinomial", "Neg", "NonMaxSuppression", "NonZero", "Not", "OneHot", "Optional",
    "OptionalGetElement", "OptionalHasElement", "Or", "PRelu", "Pad", "Pow", "QLinearConv",
    "QLinearMatMul", "QuantizeLinear", "RNN", "RandomNormal", "RandomNormalLike", "RandomUniform",
    "Range", "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
    "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare", "Relu", "Reshape",
    "Resize", "ReverseSequence", "RoiAlign", "Round", "Scan", "Scatter", "ScatterElements",
    "ScatterND", "Selu", "SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase",
    "SequenceInsert", "SequenceLength", "Shape", "Shrink", "Sigmoid", "Sign", "Sin", "Size",
    "Slice", "Softmax", "Softplus", "Softsign", "SpaceToDepth", "Split", "SplitToSequence", "Sqrt",
    "Squeeze", "StringNormalizer", "Sub", "Sum", "Tan", "Tanh", "TfIdfVectorizer",
    "ThresholdedRelu", "Tile", "TopK", "Transpose", "Trilu", "Unique", "Unsqueeze", "Upsample",
    "Where", "Xor", "NoSuchOp", ""};
const char* const kDomains[] = {
    "", "ai.onnx", "ai.onnx.ml", "com.microsoft", "ai.onnx.preview.training", "custom.x",
    "local.fn"};
const int64_t kOpsets[] = {
    -1, 0, 1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 1000,
    kI64Max};
// clang-format on
// TensorProto.DataType codes, valid ones and not.
const int kDataTypes[] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,  12,
                          13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 255, -1};
const char* const kSymbols[] = {"N", "batch", "seq", "?", "", "unk__0", "N"};
const char* const kExternalPaths[] = {"weights.bin", "../weights.bin", "/etc/passwd", "",
                                      "a/../../b",   "./x.data",       "\x01",        "model.onnx"};
const char* const kExternalNumbers[] = {
    "0",   "1", "-1",           "64", "4096", "18446744073709551615", "9223372036854775807",
    "abc", "",  "1099511627776"};

class Ctx {
 public:
  Ctx(ModelProto& m, std::minstd_rand& rng) : model(m), rng_(rng) { Collect(); }

  ModelProto& model;
  std::vector<GraphProto*> graphs;      // the main graph first, then subgraphs (function bodies'
                                        // too)
  std::vector<NodeProto*> nodes;        // every node: graphs' and functions'
  std::vector<GraphProto*> node_graph;  // the graph owning nodes[i] (nullptr: a function's)
  std::vector<TensorProto*> tensors;    // initializers and tensor attributes
  std::vector<ValueInfoProto*> infos;   // graph inputs, outputs, value_info

  size_t Pick(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
  }
  bool OneIn(int n) { return Pick(static_cast<size_t>(n)) == 0; }
  template <typename T, size_t N>
  const T& PickOf(const T (&a)[N]) {
    return a[Pick(N)];
  }
  int64_t Int() {
    if (OneIn(4)) return static_cast<int64_t>(Pick(9)) - 4;
    return PickOf(kInts);
  }
  float Float() {
    if (OneIn(4)) return static_cast<float>(static_cast<int>(Pick(17)) - 8) * 0.25f;
    return PickOf(kFloats);
  }
  std::string String() {
    if (OneIn(16)) return std::string(300 + Pick(700), 'x');
    return PickOf(kStrings);
  }
  std::string Symbol() { return PickOf(kSymbols); }
  uint32_t Bits() { return static_cast<uint32_t>(rng_()); }

  // Names a node might read: every graph input, initializer and node output, any scope.
  std::vector<std::string> Names(const GraphProto* g) const {
    std::vector<std::string> names;
    auto add = [&](const GraphProto& gr) {
      for (const auto& i : gr.input()) names.push_back(i.name());
      for (const auto& i : gr.initializer()) names.push_back(i.name());
      for (const auto& n : gr.node())
        for (const auto& o : n.output()) names.push_back(o);
    };
    if (g) add(*g);
    if (!g || names.empty())
      for (const GraphProto* gr : graphs) add(*gr);
    return names;
  }

 private:
  void CollectGraph(GraphProto* g) {
    graphs.push_back(g);
    for (auto& t : *g->mutable_initializer()) tensors.push_back(&t);
    for (auto& v : *g->mutable_input()) infos.push_back(&v);
    for (auto& v : *g->mutable_output()) infos.push_back(&v);
    for (auto& v : *g->mutable_value_info()) infos.push_back(&v);
    for (auto& n : *g->mutable_node()) CollectNode(&n, g);
  }
  void CollectNode(NodeProto* n, GraphProto* owner) {
    nodes.push_back(n);
    node_graph.push_back(owner);
    for (auto& a : *n->mutable_attribute()) {
      if (a.has_t()) tensors.push_back(a.mutable_t());
      for (auto& t : *a.mutable_tensors()) tensors.push_back(&t);
      if (a.has_g()) CollectGraph(a.mutable_g());
      for (auto& sg : *a.mutable_graphs()) CollectGraph(&sg);
    }
  }
  void Collect() {
    CollectGraph(model.mutable_graph());
    for (auto& f : *model.mutable_functions())
      for (auto& n : *f.mutable_node()) CollectNode(&n, nullptr);
  }

  std::minstd_rand& rng_;
};

template <typename T>
void EraseAt(RepeatedPtrField<T>* f, int i) {
  f->erase(f->begin() + i);
}
template <typename T>
void EraseAt(google::protobuf::RepeatedField<T>* f, int i) {
  f->erase(f->begin() + i);
}

// ---- attributes ----------------------------------------------------------------------------

NodeProto* PickNode(Ctx& c) {
  return c.nodes.empty() ? nullptr : c.nodes[c.Pick(c.nodes.size())];
}

AttributeProto* PickAttr(Ctx& c) {
  std::vector<AttributeProto*> attrs;
  for (NodeProto* n : c.nodes)
    for (auto& a : *n->mutable_attribute()) attrs.push_back(&a);
  return attrs.empty() ? nullptr : attrs[c.Pick(attrs.size())];
}

void MutateInts(Ctx& c, google::protobuf::RepeatedField<int64_t>* v) {
  switch (c.Pick(6)) {
    case 0:
      if (!v->empty()) {
        v->Set(static_cast<int>(c.Pick(v->size())), c.Int());
        break;
      }
      [[fallthrough]];
    case 1:
      v->Add(c.Int());
      break;
    case 2:
      if (!v->empty()) EraseAt(v, static_cast<int>(c.Pick(v->size())));
      break;
    case 3:
      v->Clear();
      break;
    case 4: {
      int64_t x = c.Int();
      for (auto& e : *v) e = x;
      break;
    }
    default:
      for (auto& e : *v) e = static_cast<int64_t>(0 - static_cast<uint64_t>(e));  // wraps
  }
}

void MutateFloats(Ctx& c, google::protobuf::RepeatedField<float>* v) {
  switch (c.Pick(4)) {
    case 0:
      if (!v->empty()) {
        v->Set(static_cast<int>(c.Pick(v->size())), c.Float());
        break;
      }
      [[fallthrough]];
    case 1:
      v->Add(c.Float());
      break;
    case 2:
      if (!v->empty()) EraseAt(v, static_cast<int>(c.Pick(v->size())));
      break;
    default:
      v->Clear();
  }
}

void MutateTensor(Ctx& c, TensorProto* t);

bool MutateAttrValue(Ctx& c) {
  AttributeProto* a = PickAttr(c);
  if (!a) return false;
  switch (a->type()) {
    case AttributeProto::INT:
      a->set_i(c.OneIn(3) ? static_cast<int64_t>(static_cast<uint64_t>(a->i()) + c.Pick(5) - 2)
                          : c.Int());
      return true;
    case AttributeProto::FLOAT:
      a->set_f(c.Float());
      return true;
    case AttributeProto::STRING:
      a->set_s(c.String());
      return true;
    case AttributeProto::INTS:
      MutateInts(c, a->mutable_ints());
      return true;
    case AttributeProto::FLOATS:
      MutateFloats(c, a->mutable_floats());
      return true;
    case AttributeProto::STRINGS:
      if (a->strings_size() > 0 && c.OneIn(2))
        a->set_strings(static_cast<int>(c.Pick(a->strings_size())), c.String());
      else if (c.OneIn(2))
        a->add_strings(c.String());
      else
        a->clear_strings();
      return true;
    case AttributeProto::TENSOR:
      MutateTensor(c, a->mutable_t());
      return true;
    case AttributeProto::GRAPH:
      if (a->has_g() && a->g().node_size() > 0 && c.OneIn(2)) {
        EraseAt(a->mutable_g()->mutable_node(), static_cast<int>(c.Pick(a->g().node_size())));
      } else if (a->has_g() && a->g().output_size() > 0 && c.OneIn(2)) {
        EraseAt(a->mutable_g()->mutable_output(), static_cast<int>(c.Pick(a->g().output_size())));
      } else {
        a->mutable_g()->clear_input();
      }
      return true;
    default:
      a->set_i(c.Int());
      return true;
  }
}

bool MutateAttrType(Ctx& c) {
  AttributeProto* a = PickAttr(c);
  if (!a) return false;
  if (c.OneIn(2)) {
    // A type that disagrees with the value held.
    a->set_type(static_cast<AttributeProto::AttributeType>(c.Pick(15)));
    return true;
  }
  // The value converted: a scalar as a list and back, an int as a float, a string as ints.
  switch (a->type()) {
    case AttributeProto::INT:
      a->set_type(AttributeProto::INTS);
      a->add_ints(a->i());
      a->clear_i();
      break;
    case AttributeProto::INTS:
      a->set_type(AttributeProto::INT);
      a->set_i(a->ints_size() ? a->ints(0) : 0);
      a->clear_ints();
      break;
    case AttributeProto::FLOAT:
      a->set_type(AttributeProto::INT);
      a->set_i(std::fabs(a->f()) < 1e18f ? static_cast<int64_t>(a->f()) : 0);
      break;
    case AttributeProto::STRING:
      a->set_type(AttributeProto::INTS);
      for (char ch : a->s()) a->add_ints(ch);
      break;
    default:
      a->set_type(AttributeProto::STRING);
      a->set_s(c.String());
  }
  return true;
}

void SetRandomAttr(Ctx& c, AttributeProto* a) {
  a->set_name(c.PickOf(kAttrNames));
  switch (c.Pick(5)) {
    case 0:
      a->set_type(AttributeProto::INT);
      a->set_i(c.Int());
      break;
    case 1:
      a->set_type(AttributeProto::INTS);
      for (size_t k = 0, n = c.Pick(5); k < n; ++k) a->add_ints(c.Int());
      break;
    case 2:
      a->set_type(AttributeProto::FLOAT);
      a->set_f(c.Float());
      break;
    case 3:
      a->set_type(AttributeProto::STRING);
      a->set_s(c.String());
      break;
    default:
      a->set_type(AttributeProto::FLOATS);
      for (size_t k = 0, n = c.Pick(4); k < n; ++k) a->add_floats(c.Float());
  }
}

bool AddAttr(Ctx& c) {
  NodeProto* n = PickNode(c);
  if (!n) return false;
  if (n->attribute_size() > 0 && c.OneIn(3)) {
    // The same attribute twice.
    *n->add_attribute() = n->attribute(static_cast<int>(c.Pick(n->attribute_size())));
    return true;
  }
  SetRandomAttr(c, n->add_attribute());
  return true;
}

bool RemoveAttr(Ctx& c) {
  NodeProto* n = PickNode(c);
  if (!n || n->attribute_size() == 0) return false;
  EraseAt(n->mutable_attribute(), static_cast<int>(c.Pick(n->attribute_size())));
  return true;
}

// ---- types and dims ------------------------------------------------------------------------

void MutateShape(Ctx& c, onnx::TensorShapeProto* s) {
  switch (c.Pick(6)) {
    case 0:
    case 1: {
      if (s->dim_size() == 0) {
        s->add_dim()->set_dim_value(c.Int());
        break;
      }
      auto* d = s->mutable_dim(static_cast<int>(c.Pick(s->dim_size())));
      if (c.OneIn(3))
        d->set_dim_param(c.Symbol());
      else if (c.OneIn(5))
        d->Clear();  // neither value nor symbol
      else
        d->set_dim_value(c.Int());
      break;
    }
    case 2:
      if (c.OneIn(2))
        s->add_dim()->set_dim_value(c.Int());
      else
        s->add_dim()->set_dim_param(c.Symbol());
      break;
    case 3:
      if (s->dim_size() > 0) EraseAt(s->mutable_dim(), static_cast<int>(c.Pick(s->dim_size())));
      break;
    case 4:
      s->clear_dim();  // rank 0
      break;
    default:
      for (auto& d : *s->mutable_dim()) d.set_dim_param(c.Symbol());
  }
}

bool MutateDims(Ctx& c) {
  if (c.infos.empty()) return false;
  ValueInfoProto* v = c.infos[c.Pick(c.infos.size())];
  TypeProto* t = v->mutable_type();
  while (t->has_sequence_type() || t->has_optional_type())
    t = t->has_sequence_type() ? t->mutable_sequence_type()->mutable_elem_type()
                               : t->mutable_optional_type()->mutable_elem_type();
  auto* tt = t->mutable_tensor_type();
  if (c.OneIn(8)) {
    tt->clear_shape();  // rank unknown
    return true;
  }
  MutateShape(c, tt->mutable_shape());
  return true;
}

bool MutateValueType(Ctx& c) {
  if (c.infos.empty()) return false;
  ValueInfoProto* v = c.infos[c.Pick(c.infos.size())];
  TypeProto* t = v->mutable_type();
  switch (c.Pick(5)) {
    case 0:
    case 1:
      t->mutable_tensor_type()->set_elem_type(c.PickOf(kDataTypes));
      return true;
    case 2: {  // wrapped in a sequence or an optional
      TypeProto inner = *t;
      t->Clear();
      if (c.OneIn(2))
        *t->mutable_sequence_type()->mutable_elem_type() = inner;
      else
        *t->mutable_optional_type()->mutable_elem_type() = inner;
      return true;
    }
    case 3:
      t->Clear();  // no type at all
      return true;
    default:
      t->mutable_map_type()->set_key_type(7);
      t->mutable_map_type()->mutable_value_type()->mutable_tensor_type()->set_elem_type(1);
      return true;
  }
}

// ---- tensors -------------------------------------------------------------------------------

void MutateExternal(Ctx& c, TensorProto* t) {
  t->set_data_location(TensorProto::EXTERNAL);
  if (c.OneIn(2)) t->clear_raw_data();
  t->clear_external_data();
  const char* keys[] = {"location", "offset", "length", "checksum", "bogus"};
  for (size_t k = 0, n = 1 + c.Pick(4); k < n; ++k) {
    auto* e = t->add_external_data();
    e->set_key(k == 0 ? "location" : c.PickOf(keys));
    e->set_value(e->key() == "location" ? c.PickOf(kExternalPaths) : c.PickOf(kExternalNumbers));
  }
}

void MutateTensor(Ctx& c, TensorProto* t) {
  switch (c.Pick(11)) {
    case 0:
      t->set_data_type(c.PickOf(kDataTypes));  // the data stays as it was
      break;
    case 1:
    case 2:
      if (t->dims_size() > 0) {
        t->set_dims(static_cast<int>(c.Pick(t->dims_size())), c.Int());
        break;
      }
      [[fallthrough]];
    case 3:
      if (c.OneIn(2) || t->dims_size() == 0)
        t->add_dims(c.Int());
      else
        EraseAt(t->mutable_dims(), static_cast<int>(c.Pick(t->dims_size())));
      break;
    case 4:
      if (!t->raw_data().empty()) {
        t->mutable_raw_data()->resize(c.Pick(t->raw_data().size()));  // truncated
        break;
      }
      [[fallthrough]];
    case 5:
      t->mutable_raw_data()->append(1 + c.Pick(9), static_cast<char>(c.Bits()));
      break;
    case 6:  // typed fields beside (or instead of) raw data
      if (c.OneIn(2)) t->clear_raw_data();
      for (size_t k = 0, n = c.Pick(6); k < n; ++k) {
        t->add_float_data(c.Float());
        t->add_int64_data(c.Int());
        t->add_int32_data(static_cast<int32_t>(c.Int()));
      }
      break;
    case 7:
      MutateExternal(c, t);
      break;
    case 8:
      t->clear_float_data();
      t->clear_int32_data();
      t->clear_int64_data();
      t->clear_double_data();
      t->clear_raw_data();
      break;
    case 9: {  // the bytes' contents: NaN, huge, ids out of range
      std::string& r = *t->mutable_raw_data();
      if (r.empty()) break;
      size_t at = c.Pick(r.size());
      for (size_t k = at; k < r.size() && k < at + 8; ++k) r[k] = static_cast<char>(c.Bits());
      break;
    }
    default:
      t->add_string_data(c.String());
  }
}

bool MutateInitializer(Ctx& c) {
  if (c.tensors.empty()) return false;
  MutateTensor(c, c.tensors[c.Pick(c.tensors.size())]);
  return true;
}

bool SparseInitializer(Ctx& c) {
  GraphProto* g = c.graphs[c.Pick(c.graphs.size())];
  if (g->initializer_size() == 0) return false;
  int i = static_cast<int>(c.Pick(g->initializer_size()));
  auto* sp = g->add_sparse_initializer();
  *sp->mutable_values() = g->initializer(i);
  EraseAt(g->mutable_initializer(), i);
  for (int64_t d : sp->values().dims()) sp->add_dims(d);
  // Values as a 1-D list of nnz entries, indices flat or per axis, in range or not.
  auto* values = sp->mutable_values();
  int64_t n = 1;
  for (int64_t d : values->dims()) n *= (d > 0 && d < (1 << 20)) ? d : 1;
  values->clear_dims();
  values->add_dims(c.OneIn(3) ? c.Int() : n);
  auto* idx = sp->mutable_indices();
  idx->set_name(values->name() + "_idx");
  idx->set_data_type(TensorProto::INT64);
  idx->add_dims(c.OneIn(3) ? c.Int() : n);
  for (int64_t k = 0; k < n && k < 64; ++k) idx->add_int64_data(c.OneIn(8) ? c.Int() : k);
  return true;
}

// ---- wiring and names ----------------------------------------------------------------------

bool Rewire(Ctx& c) {
  if (c.nodes.empty()) return false;
  size_t k = c.Pick(c.nodes.size());
  NodeProto* n = c.nodes[k];
  std::vector<std::string> names = c.Names(c.OneIn(4) ? nullptr : c.node_graph[k]);
  std::string name = names.empty() || c.OneIn(8) ? (c.OneIn(2) ? "" : "no_such_value")
                                                 : names[c.Pick(names.size())];
  switch (c.Pick(4)) {
    case 0:
    case 1:
      if (n->input_size() > 0) {
        n->set_input(static_cast<int>(c.Pick(n->input_size())), name);
        return true;
      }
      [[fallthrough]];
    case 2:
      n->add_input(name);
      return true;
    default:
      if (n->input_size() == 0) return false;
      EraseAt(n->mutable_input(), static_cast<int>(c.Pick(n->input_size())));
      return true;
  }
}

// A node reads an output of itself or of a later node: a cycle when that node reads this one.
bool MakeCycle(Ctx& c) {
  GraphProto* g = c.graphs[c.Pick(c.graphs.size())];
  if (g->node_size() == 0) return false;
  int i = static_cast<int>(c.Pick(g->node_size()));
  int j = i + static_cast<int>(c.Pick(g->node_size() - i));
  NodeProto* ni = g->mutable_node(i);
  const NodeProto& nj = g->node(j);
  if (nj.output_size() == 0) return false;
  std::string out = nj.output(static_cast<int>(c.Pick(nj.output_size())));
  if (ni->input_size() > 0 && c.OneIn(2))
    ni->set_input(static_cast<int>(c.Pick(ni->input_size())), out);
  else
    ni->add_input(out);
  return true;
}

bool DuplicateName(Ctx& c) {
  GraphProto* g = c.graphs[c.Pick(c.graphs.size())];
  switch (c.Pick(5)) {
    case 0: {  // a node writes a value somebody else already writes
      if (g->node_size() == 0) return false;
      NodeProto* n = g->mutable_node(static_cast<int>(c.Pick(g->node_size())));
      std::vector<std::string> names = c.Names(g);
      if (names.empty()) return false;
      std::string name = names[c.Pick(names.size())];
      if (n->output_size() > 0)
        n->set_output(static_cast<int>(c.Pick(n->output_size())), name);
      else
        n->add_output(name);
      return true;
    }
    case 1:  // a node twice
      if (g->node_size() == 0) return false;
      *g->add_node() = g->node(static_cast<int>(c.Pick(g->node_size())));
      return true;
    case 2:  // an initializer twice (maybe of another type)
      if (g->initializer_size() == 0) return false;
      *g->add_initializer() = g->initializer(static_cast<int>(c.Pick(g->initializer_size())));
      if (c.OneIn(2)) MutateTensor(c, g->mutable_initializer(g->initializer_size() - 1));
      return true;
    case 3:  // a graph input twice, or an output listed twice
      if (g->input_size() > 0 && c.OneIn(2)) {
        *g->add_input() = g->input(static_cast<int>(c.Pick(g->input_size())));
        return true;
      }
      if (g->output_size() == 0) return false;
      *g->add_output() = g->output(static_cast<int>(c.Pick(g->output_size())));
      return true;
    default: {  // an initializer named like a node output or a graph input
      std::vector<std::string> names = c.Names(g);
      if (g->initializer_size() == 0 || names.empty()) return false;
      g->mutable_initializer(static_cast<int>(c.Pick(g->initializer_size())))
          ->set_name(names[c.Pick(names.size())]);
      return true;
    }
  }
}

bool MutateOutputs(Ctx& c) {
  NodeProto* n = PickNode(c);
  if (!n) return false;
  switch (c.Pick(3)) {
    case 0:
      if (n->output_size() > 0) {
        EraseAt(n->mutable_output(), static_cast<int>(c.Pick(n->output_size())));
        return true;
      }
      [[fallthrough]];
    case 1:
      n->add_output(c.OneIn(3) ? "" : "extra_out_" + std::to_string(c.Pick(4)));
      return true;
    default:
      if (n->output_size() == 0) return false;
      n->set_output(static_cast<int>(c.Pick(n->output_size())), "");
      return true;
  }
}

bool MutateGraphIO(Ctx& c) {
  GraphProto* g = c.graphs[c.Pick(c.graphs.size())];
  switch (c.Pick(5)) {
    case 0:
      if (g->input_size() == 0) return false;
      EraseAt(g->mutable_input(), static_cast<int>(c.Pick(g->input_size())));
      return true;
    case 1:
      if (g->output_size() == 0) return false;
      EraseAt(g->mutable_output(), static_cast<int>(c.Pick(g->output_size())));
      return true;
    case 2: {  // an intermediate value, initializer or input as a graph output
      std::vector<std::string> names = c.Names(g);
      if (names.empty()) return false;
      g->add_output()->set_name(names[c.Pick(names.size())]);
      return true;
    }
    case 3: {  // an initializer as an overridable graph input, typed or not
      if (g->initializer_size() == 0) return false;
      const TensorProto& t = g->initializer(static_cast<int>(c.Pick(g->initializer_size())));
      auto* in = g->add_input();
      in->set_name(t.name());
      if (c.OneIn(2)) {
        auto* tt = in->mutable_type()->mutable_tensor_type();
        tt->set_elem_type(t.data_type());
        for (int64_t d : t.dims()) tt->mutable_shape()->add_dim()->set_dim_value(d);
      }
      return true;
    }
    default: {
      if (g->input_size() == 0) return false;
      ValueInfoProto* in = g->mutable_input(static_cast<int>(c.Pick(g->input_size())));
      in->set_name(c.OneIn(2) ? "" : in->name() + "_renamed");
      return true;
    }
  }
}

bool MutateNodes(Ctx& c) {
  GraphProto* g = c.graphs[c.Pick(c.graphs.size())];
  if (g->node_size() == 0) return false;
  int i = static_cast<int>(c.Pick(g->node_size()));
  switch (c.Pick(3)) {
    case 0:
      EraseAt(g->mutable_node(), i);
      return true;
    case 1: {  // out of topological order
      int j = static_cast<int>(c.Pick(g->node_size()));
      g->mutable_node()->SwapElements(i, j);
      return true;
    }
    default:
      g->mutable_node(i)->set_op_type(c.PickOf(kOps));
      return true;
  }
}

bool MutateDomain(Ctx& c) {
  NodeProto* n = PickNode(c);
  if (!n) return false;
  n->set_domain(c.PickOf(kDomains));
  return true;
}

bool MutateOpset(Ctx& c) {
  ModelProto& m = c.model;
  switch (c.Pick(5)) {
    case 0:
    case 1:
      if (m.opset_import_size() > 0) {
        m.mutable_opset_import(static_cast<int>(c.Pick(m.opset_import_size())))
            ->set_version(c.PickOf(kOpsets));
        return true;
      }
      [[fallthrough]];
    case 2: {
      auto* o = m.add_opset_import();
      o->set_domain(c.PickOf(kDomains));
      o->set_version(c.PickOf(kOpsets));
      return true;
    }
    case 3:
      if (m.opset_import_size() == 0) return false;
      EraseAt(m.mutable_opset_import(), static_cast<int>(c.Pick(m.opset_import_size())));
      return true;
    default:
      m.set_ir_version(c.OneIn(2) ? static_cast<int64_t>(c.Pick(12)) : c.Int());
      return true;
  }
}

// ---- functions and subgraphs ---------------------------------------------------------------

// Moves a run of the main graph's nodes into a model-local function and calls it (its inputs:
// what the run reads from outside it; its outputs: the last node's). Sometimes the function
// calls itself, or takes an attribute by reference.
bool ExtractFunction(Ctx& c) {
  GraphProto* g = c.model.mutable_graph();
  if (g->node_size() == 0) return false;
  int first = static_cast<int>(c.Pick(g->node_size()));
  int count = 1 + static_cast<int>(c.Pick(std::min(3, g->node_size() - first)));
  FunctionProto* f = c.model.add_functions();
  const std::string domain = c.OneIn(4) ? "" : "local.fn";
  f->set_name("fn" + std::to_string(c.model.functions_size()));
  f->set_domain(domain);
  std::set<std::string> produced;
  for (int k = first; k < first + count; ++k) {
    const NodeProto& n = g->node(k);
    for (const auto& in : n.input())
      if (!in.empty() && !produced.count(in)) {
        bool seen = false;
        for (const auto& x : f->input()) seen |= x == in;
        if (!seen) f->add_input(in);
      }
    for (const auto& o : n.output()) produced.insert(o);
    *f->add_node() = n;
  }
  const NodeProto& last = g->node(first + count - 1);
  for (const auto& o : last.output()) f->add_output(o);
  auto* op = f->add_opset_import();
  op->set_domain("");
  op->set_version(c.OneIn(4) ? c.PickOf(kOpsets) : 13);
  if (c.OneIn(4)) {  // recursion
    NodeProto* self = f->add_node();
    self->set_op_type(f->name());
    self->set_domain(domain);
    for (const auto& in : f->input()) self->add_input(in);
    self->add_output("recursive_out");
  }
  if (c.OneIn(4) && f->node_size() > 0) {  // an attribute taken from the call
    f->add_attribute("alpha");
    auto* a = f->mutable_node(0)->add_attribute();
    a->set_name(c.PickOf(kAttrNames));
    a->set_ref_attr_name("alpha");
    a->set_type(AttributeProto::FLOAT);
  }
  NodeProto call;
  call.set_op_type(f->name());
  call.set_domain(domain);
  call.set_name("call_" + f->name());
  for (const auto& in : f->input()) call.add_input(in);
  for (const auto& o : f->output()) call.add_output(o);
  if (c.OneIn(3)) SetRandomAttr(c, call.add_attribute());
  auto* nodes = g->mutable_node();
  nodes->DeleteSubrange(first, count);
  *nodes->Add() = call;
  for (int k = nodes->size() - 1; k > first; --k) nodes->SwapElements(k, k - 1);
  if (!domain.empty() && !c.OneIn(4)) {
    auto* imp = c.model.add_opset_import();
    imp->set_domain(domain);
    imp->set_version(1);
  }
  return true;
}

// A function's body mutated: a node of it removed, its opset changed, or it calls another.
bool MutateFunction(Ctx& c) {
  if (c.model.functions_size() == 0) return ExtractFunction(c);
  FunctionProto* f = c.model.mutable_functions(static_cast<int>(c.Pick(c.model.functions_size())));
  switch (c.Pick(4)) {
    case 0:
      if (f->node_size() == 0) return false;
      EraseAt(f->mutable_node(), static_cast<int>(c.Pick(f->node_size())));
      return true;
    case 1:
      if (f->opset_import_size() == 0) return false;
      f->mutable_opset_import(0)->set_version(c.PickOf(kOpsets));
      return true;
    case 2: {
      const FunctionProto& other =
          c.model.functions(static_cast<int>(c.Pick(c.model.functions_size())));
      NodeProto* n = f->add_node();
      n->set_op_type(other.name());
      n->set_domain(other.domain());
      for (const auto& in : f->input()) n->add_input(in);
      n->add_output("nested_out");
      return true;
    }
    default:
      if (f->input_size() == 0) return false;
      EraseAt(f->mutable_input(), static_cast<int>(c.Pick(f->input_size())));
      return true;
  }
}

// A branch or loop body holding a copy of `n` with outputs renamed by `suffix`.
GraphProto Body(const NodeProto& n, const std::string& suffix) {
  GraphProto b;
  b.set_name("body" + suffix);
  NodeProto* copy = b.add_node();
  *copy = n;
  for (int k = 0; k < copy->output_size(); ++k) {
    if (copy->output(k).empty()) continue;
    copy->set_output(k, copy->output(k) + suffix);
    b.add_output()->set_name(copy->output(k));
  }
  return b;
}

TensorProto ScalarInitializer(const std::string& name, int data_type, int64_t v) {
  TensorProto t;
  t.set_name(name);
  t.set_data_type(data_type);
  if (data_type == TensorProto::BOOL)
    t.add_int32_data(v != 0);
  else
    t.add_int64_data(v);
  return t;
}

// Replaces a node of some graph by an If whose branches hold it (the condition a constant or
// a graph input), or by a Loop whose body computes it as scan outputs.
bool WrapNode(Ctx& c) {
  GraphProto* g = c.graphs[c.Pick(c.graphs.size())];
  if (g->node_size() == 0) return false;
  int i = static_cast<int>(c.Pick(g->node_size()));
  NodeProto n = g->node(i);
  if (n.output_size() == 0) return false;
  const std::string tag = "_w" + std::to_string(c.Bits() % 10000);
  NodeProto w;
  w.set_name(n.name() + tag);
  for (const auto& o : n.output()) w.add_output(o);
  if (c.OneIn(2)) {
    w.set_op_type("If");
    std::string cond = "cond" + tag;
    *g->add_initializer() = ScalarInitializer(cond, TensorProto::BOOL, c.Pick(2));
    w.add_input(cond);
    auto* then_b = w.add_attribute();
    then_b->set_name("then_branch");
    then_b->set_type(AttributeProto::GRAPH);
    *then_b->mutable_g() = Body(n, tag + "_t");
    auto* else_b = w.add_attribute();
    else_b->set_name("else_branch");
    else_b->set_type(AttributeProto::GRAPH);
    *else_b->mutable_g() = Body(n, tag + "_e");
    if (c.OneIn(4)) else_b->mutable_g()->clear_output();  // branches that disagree
  } else {
    w.set_op_type("Loop");
    std::string trip = "trip" + tag, cond = "cond" + tag;
    const int64_t trips[] = {0, 1, 2, 3, -1};
    *g->add_initializer() = ScalarInitializer(trip, TensorProto::INT64, c.PickOf(trips));
    *g->add_initializer() = ScalarInitializer(cond, TensorProto::BOOL, 1);
    w.add_input(c.OneIn(8) ? "" : trip);  // "" with a true condition: unbounded
    w.add_input(cond);
    auto* body = w.add_attribute();
    body->set_name("body");
    body->set_type(AttributeProto::GRAPH);
    GraphProto b = Body(n, tag + "_b");
    auto* it = b.add_input();
    it->set_name("iter" + tag);
    it->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::INT64);
    it->mutable_type()->mutable_tensor_type()->mutable_shape();
    auto* ci = b.add_input();
    ci->set_name("cin" + tag);
    ci->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::BOOL);
    ci->mutable_type()->mutable_tensor_type()->mutable_shape();
    NodeProto* id = b.add_node();
    id->set_op_type("Identity");
    id->add_input("cin" + tag);
    id->add_output("cout" + tag);
    auto* co = b.add_output();
    co->set_name("cout" + tag);
    b.mutable_output()->SwapElements(0, b.output_size() - 1);
    *body->mutable_g() = b;
  }
  *g->mutable_node(i) = w;
  return true;
}

using Mutation = bool (*)(Ctx&);
struct Weighted {
  Mutation fn;
  int weight;
};
const Weighted kMutations[] = {
    {MutateAttrValue, 8}, {MutateAttrType, 2},  {AddAttr, 3},           {RemoveAttr, 3},
    {MutateDims, 6},      {MutateValueType, 3}, {MutateInitializer, 6}, {SparseInitializer, 1},
    {Rewire, 5},          {MakeCycle, 2},       {DuplicateName, 3},     {MutateOutputs, 2},
    {MutateGraphIO, 3},   {MutateNodes, 4},     {MutateDomain, 1},      {MutateOpset, 3},
    {ExtractFunction, 1}, {MutateFunction, 1},  {WrapNode, 2},
};

bool MutateOnce(ModelProto& m, std::minstd_rand& rng) {
  int total = 0;
  for (const auto& w : kMutations) total += w.weight;
  for (int attempt = 0; attempt < 8; ++attempt) {
    int r = std::uniform_int_distribution<int>(0, total - 1)(rng);
    for (const auto& w : kMutations) {
      if (r < w.weight) {
        Ctx c(m, rng);
        if (w.fn(c)) return true;
        break;
      }
      r -= w.weight;
    }
  }
  return false;
}

bool ParseModelProto(const uint8_t* data, size_t size, ModelProto* m) {
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) return false;
  return m->ParseFromArray(data, static_cast<int>(size));
}

}  // namespace

size_t MutateModel(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  ModelProto m;
  if (!ParseModelProto(data, size, &m) || !m.has_graph()) return 0;
  std::minstd_rand rng(seed ? seed : 1);
  for (int tries = 0; tries < 4; ++tries) {
    ModelProto candidate = m;
    int rounds = 1 + static_cast<int>(rng() % 3);
    bool changed = false;
    for (int k = 0; k < rounds; ++k) changed |= MutateOnce(candidate, rng);
    if (!changed) continue;
    std::string out;
    if (!candidate.SerializeToString(&out) || out.size() > max_size) continue;
    std::memcpy(data, out.data(), out.size());
    return out.size();
  }
  return 0;
}

size_t MutateTensorProto(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  TensorProto t;
  if (size > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !t.ParseFromArray(data, static_cast<int>(size)))
    return 0;
  ModelProto unused;
  std::minstd_rand rng(seed ? seed : 1);
  Ctx c(unused, rng);
  for (int k = 0, n = 1 + static_cast<int>(rng() % 2); k < n; ++k) MutateTensor(c, &t);
  std::string out;
  if (!t.SerializeToString(&out) || out.size() > max_size) return 0;
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

std::string MutateModelBytes(const std::string& bytes, unsigned int seed) {
  std::string buf = bytes;
  buf.resize(std::max<size_t>(bytes.size() * 2 + 4096, 1 << 16));
  size_t n = MutateModel(reinterpret_cast<uint8_t*>(buf.data()), bytes.size(), buf.size(), seed);
  buf.resize(n);
  return buf;
}

size_t CrossOverModels(const uint8_t* a, size_t a_size, const uint8_t* b, size_t b_size,
                       uint8_t* out, size_t max_out, unsigned int seed) {
  ModelProto ma, mb;
  if (!ParseModelProto(a, a_size, &ma) || !ParseModelProto(b, b_size, &mb)) return 0;
  if (!ma.has_graph() || !mb.has_graph()) return 0;
  std::minstd_rand rng(seed ? seed : 1);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  GraphProto* ga = ma.mutable_graph();
  const GraphProto& gb = mb.graph();
  switch (rng() % 3) {
    case 0: {  // a run of b's nodes, with the initializers they read, into a's main graph
      if (gb.node_size() == 0) return 0;
      int first = pick(gb.node_size());
      int count = 1 + pick(std::min(4, gb.node_size() - first));
      int at = pick(ga->node_size() + 1);
      std::set<std::string> have;
      for (const auto& t : ga->initializer()) have.insert(t.name());
      for (int k = first; k < first + count; ++k) {
        const NodeProto& n = gb.node(k);
        for (const auto& in : n.input())
          for (const auto& t : gb.initializer())
            if (t.name() == in && have.insert(in).second) *ga->add_initializer() = t;
        *ga->add_node() = n;
        for (int j = ga->node_size() - 1; j > at; --j) ga->mutable_node()->SwapElements(j, j - 1);
        ++at;
      }
      if (rng() % 2 && gb.output_size() > 0) *ga->add_output() = gb.output(pick(gb.output_size()));
      break;
    }
    case 1:  // b's functions and opset imports
      if (mb.functions_size() == 0 && mb.opset_import_size() == 0) return 0;
      for (const auto& f : mb.functions()) *ma.add_functions() = f;
      for (const auto& o : mb.opset_import()) *ma.add_opset_import() = o;
      break;
    default: {  // a node of a taking b's main graph as a subgraph attribute
      if (ga->node_size() == 0) return 0;
      auto* attr = ga->mutable_node(pick(ga->node_size()))->add_attribute();
      const char* names[] = {"then_branch", "else_branch", "body"};
      attr->set_name(names[pick(3)]);
      attr->set_type(AttributeProto::GRAPH);
      *attr->mutable_g() = gb;
      break;
    }
  }
  std::string s;
  if (!ma.SerializeToString(&s) || s.size() > max_out) return 0;
  std::memcpy(out, s.data(), s.size());
  return s.size();
}

}  // namespace ferry::fuzz

// Tensor: dtype + shape + a pointer to the elements, either owned (shared storage, cheap to copy)
// or a view into memory somebody else owns (a session arena). Value: a tensor, a sequence of
// tensors or of maps, a map (ai.onnx.ml), or nothing (an empty optional or an omitted input).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace ferry {

using Shape = std::vector<int64_t>;

// Product of dims (1 for a scalar, 0 when any dim is 0, INT64_MAX when the product overflows:
// no undefined behaviour whatever the dims). Callers validate dims are non-negative first.
int64_t NumElements(const Shape& shape);
// Bytes read into bool storage from a file (ONNX raw_data, external data, .npy): every nonzero
// byte becomes 1 (a bool holding another value is undefined behaviour to read).
void NormalizeBoolBytes(void* data, int64_t n);
// "[1,3,224,224]"
std::string ShapeToString(const Shape& shape);
// Row-major strides in elements.
std::vector<int64_t> Strides(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  // Allocates owned, zero-initialised storage (64-byte aligned; strings empty).
  Tensor(DType dtype, Shape shape);
  // A non-owning view; `data` must outlive every use of the view. Not for kString.
  static Tensor View(DType dtype, Shape shape, void* data);
  // Owned storage allocated by somebody else: `data` (aligned at least to the element size, not
  // necessarily to 64 bytes) lives as long as `owner`. Lets the importer keep a parsed
  // initializer's bytes without copying them. Not for kString.
  static Tensor Adopt(DType dtype, Shape shape, std::shared_ptr<void> owner, void* data);
  // Owned, 64-byte aligned storage left uninitialised, for callers that overwrite every byte
  // at once (file readers). Not for kString.
  static Tensor Uninitialized(DType dtype, Shape shape);
  // A float/int scalar or vector convenience, mostly for tests.
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values, Shape shape);

  bool defined() const { return dtype_ != DType::kUndefined; }
  // True when the tensor owns (shares ownership of) its storage; false for views.
  bool owned() const { return owner_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[static_cast<size_t>(i)]; }
  int64_t size() const { return size_; }
  size_t nbytes() const { return static_cast<size_t>(size_) * DTypeSize(dtype_); }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <typename T>
  T* data() {
    assert(DTypeOf<T>() == dtype_);
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* data() const {
    assert(DTypeOf<T>() == dtype_);
    return static_cast<const T*>(data_);
  }
  template <typename T>
  std::span<T> span() {
    return {data<T>(), static_cast<size_t>(size_)};
  }
  template <typename T>
  std::span<const T> span() const {
    return {data<T>(), static_cast<size_t>(size_)};
  }

  // Same storage, new shape with the same element count.
  Tensor Reshaped(Shape shape) const;
  // Deep copy into owned storage.
  Tensor Clone() const;
  // Element i converted to double / int64 (numeric and bool only).
  double GetAsDouble(int64_t i) const;
  int64_t GetAsInt64(int64_t i) const;
  // Values of an integer tensor as int64 (for shape-like inputs).
  std::vector<int64_t> ToInt64Vector() const;

 private:
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  int64_t size_ = 0;
  void* data_ = nullptr;
  std::shared_ptr<void> owner_;
};

template <typename T>
Tensor Tensor::FromVector(const std::vector<T>& values, Shape shape) {
  Tensor t(DTypeOf<T>(), std::move(shape));
  assert(static_cast<size_t>(t.size()) == values.size());
  T* d = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) d[i] = values[i];
  return t;
}

// A run-time value. ONNX's optional maps to kNone (empty) or to the contained kind.
//
// A map (ai.onnx.ml's map(K, V)) is a 1-D keys tensor (int64 or string, distinct) and a 1-D
// values tensor of the same length: tensor() holds the values, map_keys() the keys. A sequence
// of maps (ZipMap's output) is a kSequence whose sequence() holds each map's values and
// sequence_map_keys() each map's keys, so code that compares sequences compares the values.
class Value {
 public:
  enum class Kind { kNone, kTensor, kSequence, kMap };
  Value() = default;
  Value(Tensor t) : kind_(Kind::kTensor), tensor_(std::move(t)) {}
  static Value Sequence(std::vector<Tensor> items, DType elem_type) {
    Value v;
    v.kind_ = Kind::kSequence;
    v.sequence_ = std::move(items);
    v.elem_type_ = elem_type;
    return v;
  }
  // Precondition (callers validate): keys and values 1-D of the same length, owned.
  static Value Map(Tensor keys, Tensor values) {
    Value v(std::move(values));
    v.kind_ = Kind::kMap;
    v.keys_ = std::move(keys);
    return v;
  }
  // Precondition: keys.size() == values.size(), each pair as for Map. `value_type` is the
  // values' dtype (what an empty sequence reports).
  static Value MapSequence(std::vector<Tensor> keys, std::vector<Tensor> values, DType value_type) {
    Value v = Sequence(std::move(values), value_type);
    v.seq_keys_ = std::move(keys);
    v.maps_ = true;
    return v;
  }

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  bool is_sequence() const { return kind_ == Kind::kSequence; }
  bool is_map() const { return kind_ == Kind::kMap; }
  // A sequence whose items are maps.
  bool is_map_sequence() const { return kind_ == Kind::kSequence && maps_; }
  const Tensor& tensor() const { return tensor_; }
  Tensor& tensor() { return tensor_; }
  const std::vector<Tensor>& sequence() const { return sequence_; }
  std::vector<Tensor>& sequence() { return sequence_; }
  DType sequence_elem_type() const { return elem_type_; }
  // The keys of a map (is_map()).
  const Tensor& map_keys() const { return keys_; }
  // The keys of each map of a sequence of maps (is_map_sequence()), parallel to sequence().
  const std::vector<Tensor>& sequence_map_keys() const { return seq_keys_; }

 private:
  Kind kind_ = Kind::kNone;
  Tensor tensor_;
  std::vector<Tensor> sequence_;
  DType elem_type_ = DType::kUndefined;
  Tensor keys_;
  std::vector<Tensor> seq_keys_;
  bool maps_ = false;
};

}  // namespace ferry

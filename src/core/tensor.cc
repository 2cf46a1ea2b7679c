#include "core/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>

#include "core/memory_budget.h"

namespace ferry {

void NormalizeBoolBytes(void* data, int64_t n) {
  auto* p = static_cast<unsigned char*>(data);
  for (int64_t i = 0; i < n; ++i) p[i] = p[i] != 0;
}

int64_t NumElements(const Shape& shape) {
  for (int64_t d : shape)
    if (d == 0) return 0;  // before any product that could overflow
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) return std::numeric_limits<int64_t>::max();
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  // Saturates like NumElements: an empty tensor may have dims whose product overflows.
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) {
    const auto k = static_cast<size_t>(i);
    if (__builtin_mul_overflow(st[k + 1], shape[k + 1], &st[k]))
      st[k] = std::numeric_limits<int64_t>::max();
  }
  return st;
}

namespace {
constexpr std::align_val_t kAlign{64};

// Frees 64-byte aligned storage and credits the budget it was charged to.
struct AlignedDelete {
  std::shared_ptr<MemoryBudget> budget;
  size_t bytes = 0;
  void operator()(void* p) const {
    ::operator delete[](p, kAlign);
    if (budget) budget->Credit(bytes);
  }
};

// At least `bytes` (one at least, rounded up to 64) of aligned storage, charged to the calling
// thread's memory budget.
std::shared_ptr<void> AllocateAligned(size_t bytes, void** data) {
  bytes = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = ::operator new[](bytes, kAlign);
  const std::shared_ptr<MemoryBudget>& budget = MemoryBudget::Current();
  if (budget) budget->Charge(bytes);
  *data = p;
  return std::shared_ptr<void>(p, AlignedDelete{budget, budget ? bytes : 0});
}
}  // namespace

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  size_ = NumElements(shape_);
  if (dtype_ == DType::kString) {
    const size_t n = static_cast<size_t>(std::max<int64_t>(size_, 1));
    auto* strs = new std::string[n];
    std::shared_ptr<MemoryBudget> budget = MemoryBudget::Current();
    const size_t bytes = n * sizeof(std::string);
    if (budget) budget->Charge(bytes);
    owner_ = std::shared_ptr<void>(strs, [budget, bytes](void* p) {
      delete[] static_cast<std::string*>(p);
      if (budget) budget->Credit(bytes);
    });
    data_ = strs;
    return;
  }
  owner_ = AllocateAligned(nbytes(), &data_);
  std::memset(data_, 0, (std::max<size_t>(nbytes(), 1) + 63) / 64 * 64);  // the padding too
}

Tensor Tensor::Adopt(DType dtype, Shape shape, std::shared_ptr<void> owner, void* data) {
  assert(dtype != DType::kString && owner);
  Tensor t = View(dtype, std::move(shape), data);
  t.owner_ = std::move(owner);
  return t;
}

Tensor Tensor::Uninitialized(DType dtype, Shape shape) {
  assert(dtype != DType::kString);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.size_ = NumElements(t.shape_);
  t.owner_ = AllocateAligned(t.nbytes(), &t.data_);
  return t;
}

Tensor Tensor::View(DType dtype, Shape shape, void* data) {
  assert(dtype != DType::kString);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.size_ = NumElements(t.shape_);
  t.data_ = data;
  return t;
}

Tensor Tensor::Reshaped(Shape shape) const {
  Tensor t = *this;
  assert(NumElements(shape) == size_);
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::Clone() const {
  if (!defined()) return Tensor();
  Tensor t(dtype_, shape_);
  if (dtype_ == DType::kString) {
    for (int64_t i = 0; i < size_; ++i) t.data<std::string>()[i] = data<std::string>()[i];
  } else if (size_ > 0) {
    std::memcpy(t.data_, data_, nbytes());
  }
  return t;
}

double Tensor::GetAsDouble(int64_t i) const {
  double v = 0;
  VisitPod(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    v = static_cast<double>(static_cast<ComputeType<T>>(static_cast<const T*>(data_)[i]));
  });
  return v;
}

int64_t Tensor::GetAsInt64(int64_t i) const {
  int64_t v = 0;
  VisitPod(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto x = static_cast<ComputeType<T>>(static_cast<const T*>(data_)[i]);
    if constexpr (std::is_floating_point_v<decltype(x)>) {
      // NaN reads as 0 and out-of-range values saturate (a plain cast would be undefined).
      if (std::isnan(x))
        v = 0;
      else if (x >= 9.2233720368547758e18)
        v = std::numeric_limits<int64_t>::max();
      else if (x <= -9.2233720368547758e18)
        v = std::numeric_limits<int64_t>::min();
      else
        v = static_cast<int64_t>(x);
    } else {
      v = static_cast<int64_t>(x);
    }
  });
  return v;
}

std::vector<int64_t> Tensor::ToInt64Vector() const {
  std::vector<int64_t> out(static_cast<size_t>(size_));
  for (int64_t i = 0; i < size_; ++i) out[static_cast<size_t>(i)] = GetAsInt64(i);
  return out;
}

}  // namespace ferry

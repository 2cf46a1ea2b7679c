// Helpers shared by reference kernels: input checks, axis handling, broadcasting.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/op.h"

namespace ferry::ops {

// Checks the node lists between min and max inputs and that the first `min` are present.
Status CheckArity(const OpContext& ctx, size_t min_inputs, size_t max_inputs);
// Input i must be a tensor (present); names it in the error otherwise.
Status RequireTensor(const OpContext& ctx, size_t i, std::string_view what);
// Input i's dtype must be one of `allowed`.
Status RequireDType(const OpContext& ctx, size_t i, std::initializer_list<DType> allowed);
// Maps axis in [-rank, rank) to [0, rank); error names the node and values.
Result<int64_t> NormalizeAxis(const OpContext& ctx, int64_t axis, int64_t rank, std::string_view what = "axis");
// numpy-style multidirectional broadcast of shapes.
Result<Shape> BroadcastShapes(const OpContext& ctx, const std::vector<Shape>& shapes);

// Maps an output linear index to the linear index of an input broadcast to `out`.
class BroadcastIndexer {
 public:
  BroadcastIndexer(const Shape& in, const Shape& out);
  // Input offset for output offset `i`.
  int64_t operator()(int64_t i) const;
  bool identity() const { return identity_; }
  bool scalar() const { return scalar_; }

 private:
  std::vector<int64_t> out_strides_, in_strides_;  // in_strides_ zero on broadcast dims
  bool identity_ = false, scalar_ = false;
};

// Runs fn(begin, end) over [0, n), in parallel when the context has a pool and n is large.
void ParallelFor(const OpContext& ctx, int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn);

// Copies `n` elements of any dtype (strings copied as strings).
void CopyElements(DType dt, const void* src, void* dst, int64_t n);
// Copies element src[si] -> dst[di] of size `elem` bytes, or string.
inline void CopyElement(DType dt, const void* src, int64_t si, void* dst, int64_t di, size_t elem) {
  if (dt == DType::kString)
    static_cast<std::string*>(dst)[di] = static_cast<const std::string*>(src)[si];
  else
    std::memcpy(static_cast<char*>(dst) + di * static_cast<int64_t>(elem),
                static_cast<const char*>(src) + si * static_cast<int64_t>(elem), elem);
}

// Reads an optional int64 tensor input as a vector (empty when absent).
std::vector<int64_t> OptionalInts(const OpContext& ctx, size_t i);

}  // namespace ferry::ops

// Internal to the cpu provider: packed weights, and how a kernel shares them between the run
// contexts of a session (NodeSlot::packs, PackCache in cpu_kernel.h).
//
// A kernel packs a constant weight once per session: SharedPack looks the packed form up in the
// node's cache under the weight's address and a tag naming every parameter the packed bytes
// depend on, and makes it only when absent. A computed weight (an input that changes from run
// to run) is packed by every prepare into a form of that run context's own. Packed forms are
// read-only once made: run() never writes them.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "ops/cpu/cpu_kernel.h"

namespace ferry::ops::cpu {

// n floats, 64-byte aligned, zeroed.
class PackedFloats {
 public:
  explicit PackedFloats(size_t n)
      : n_(n),
        p_(static_cast<float*>(
            ::operator new[](std::max<size_t>(n, 1) * sizeof(float), std::align_val_t(64)))) {
    std::memset(p_.get(), 0, std::max<size_t>(n, 1) * sizeof(float));
  }
  float* data() { return p_.get(); }
  const float* data() const { return p_.get(); }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(float); }

 private:
  struct Free {
    void operator()(float* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  size_t n_;
  std::unique_ptr<float, Free> p_;
};
using PackedPtr = std::shared_ptr<const PackedFloats>;

// The packed form of weight `w`: shared through the node's cache when `w_const` (the same data
// every run), else made now. `make` returns a shared_ptr<T> (T has bytes()).
template <typename T, typename Make>
std::shared_ptr<const T> SharedPack(const NodeSlot& slot, bool w_const, const void* w,
                                    const std::string& tag, Make&& make) {
  if (!w_const || !slot.packs) return make();
  return slot.packs->Get<T>(w, tag, std::forward<Make>(make));
}

// Whether input i of the node is the same every run.
inline bool ConstInput(const NodeSlot& slot, size_t i) {
  return i < slot.const_inputs.size() && slot.const_inputs[i];
}

// Gives `kernel` (a class with Pack, PackTag and SetPacked: the own conv kernels) its packed
// weights for `w`.
template <typename K>
void PackFor(K& kernel, const NodeSlot& slot, bool w_const, const float* w) {
  kernel.SetPacked(
      SharedPack<PackedFloats>(slot, w_const, w, kernel.PackTag(), [&] { return kernel.Pack(w); }));
}

}  // namespace ferry::ops::cpu

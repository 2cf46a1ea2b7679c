// Arena planning: where each intermediate tensor of a run lives in one block of memory.
//
// A graph's first run with a new input signature (dtypes and shapes of its inputs) is a
// planning run: tensors get their own allocations while a PlanRecorder notes each value's size
// and the steps where it is first written and last read, plus what may share bytes (an output
// written over its residual, a Concat input written in its place in the Concat's output).
// Finish() turns that into an ArenaLayout (greedy by size, 64-byte aligned), which the graph
// keeps per signature and every later run with that signature uses: each run context holds its
// own ArenaBuffer and places tensors at the layout's offsets. A tensor that outgrows its slot
// (data-dependent shapes) gets its own allocation, so layouts never make a run wrong.
//
// Sharing between threads: an ArenaLayout is immutable once made and shared by every run
// context; a PlanRecorder and an ArenaBuffer belong to one run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/memory_budget.h"

namespace ferry::runtime {

struct ArenaSlot {
  size_t offset = 0, size = 0;
  // > 0: a channel slice of a Concat's channels-last output (the value's own pixels this many
  // floats apart), written there by a kernel that supports it (NodeSlot::out_pixel_stride).
  int64_t pixel_stride = 0;
};

struct ArenaLayout {
  std::vector<ArenaSlot> slots;  // per value id; size 0 = not in the arena
  size_t total = 0;              // bytes of the arena
};

// 64-byte aligned bytes, grown on demand (contents not kept when it grows).
class ArenaBuffer {
 public:
  // At least `bytes` bytes; null for 0. Growing charges the calling thread's memory budget.
  std::byte* Reserve(size_t bytes);
  size_t size() const { return size_; }

 private:
  std::unique_ptr<std::byte[], void (*)(std::byte*)> data_{nullptr, [](std::byte*) {}};
  size_t size_ = 0;
  // The budget the buffer is charged to (the calling thread's when it grew), credited when it
  // grows again or goes.
  class Charge {
   public:
    Charge() = default;
    Charge(std::shared_ptr<MemoryBudget> budget, size_t bytes);
    Charge(Charge&& o) noexcept;
    Charge& operator=(Charge&& o) noexcept;
    ~Charge();

   private:
    std::shared_ptr<MemoryBudget> budget_;
    size_t bytes_ = 0;
  } charge_;
};

// What a planning run observes, per value id (`steps`: the graph's step count).
class PlanRecorder {
 public:
  PlanRecorder(size_t values, int steps);
  // Value `id` was written at step `s` with `bytes` bytes in a tensor the arena may hold.
  void Written(int id, int s, size_t bytes) {
    sizes_[static_cast<size_t>(id)] = bytes;
    first_[static_cast<size_t>(id)] = s;
  }
  // Value `id` was last read at step `s` (freed there).
  void Freed(int id, int s) { last_[static_cast<size_t>(id)] = s; }
  size_t size(int id) const { return sizes_[static_cast<size_t>(id)]; }
  // The fused output `out` was written over its residual `res` (same bytes).
  void WrittenOver(int out, int res) { over_[static_cast<size_t>(out)] = res; }
  // The producer of `value` could write it at byte `offset` of Concat output `concat_out`, its
  // pixels `stride` floats apart (0: contiguous).
  void Placeable(int value, int concat_out, int64_t offset, int64_t stride) {
    places_.push_back({value, concat_out, offset, stride});
  }
  // `value` was written by a kernel that takes a pixel stride.
  void StridedOk(int value) { strided_ok_[static_cast<size_t>(value)] = true; }

  // The layout: values without a slot of their own become guests of a host value's slot (an
  // output written over its residual; a Concat input placed in the Concat's output when
  // `placeable[value]` and its producer allowed it), the host living from the first to the
  // last reader of any of its guests.
  ArenaLayout Finish(const std::vector<bool>& placeable);

 private:
  struct Placement {
    int value, concat_out;
    int64_t offset, stride;
  };
  std::vector<size_t> sizes_;
  std::vector<int> first_, last_;
  std::vector<int> over_;  // output -> residual it was written over, or -1
  std::vector<Placement> places_;
  std::vector<bool> strided_ok_;
};

// Greedy placement by size: values whose lifetimes [first, last] overlap get disjoint bytes.
ArenaLayout MakeLayout(const std::vector<size_t>& sizes, const std::vector<int>& first,
                       const std::vector<int>& last);

}  // namespace ferry::runtime

#include "runtime/arena.h"

#include <algorithm>
#include <new>
#include <utility>

namespace ferry::runtime {

std::byte* ArenaBuffer::Reserve(size_t bytes) {
  if (bytes == 0) return data_.get();
  if (size_ < bytes) {
    data_.reset();
    charge_ = Charge();
    size_ = 0;
    auto* p = static_cast<std::byte*>(::operator new[](bytes, std::align_val_t(64)));
    data_ = std::unique_ptr<std::byte[], void (*)(std::byte*)>(
        p, [](std::byte* q) { ::operator delete[](q, std::align_val_t(64)); });
    size_ = bytes;
    charge_ = Charge(MemoryBudget::Current(), bytes);
  }
  return data_.get();
}

ArenaBuffer::Charge::Charge(std::shared_ptr<MemoryBudget> budget, size_t bytes)
    : budget_(std::move(budget)), bytes_(budget_ ? bytes : 0) {
  if (budget_) budget_->Charge(bytes_);
}
ArenaBuffer::Charge::Charge(Charge&& o) noexcept
    : budget_(std::move(o.budget_)), bytes_(std::exchange(o.bytes_, 0)) {}
ArenaBuffer::Charge& ArenaBuffer::Charge::operator=(Charge&& o) noexcept {
  if (this != &o) {
    if (budget_) budget_->Credit(bytes_);
    budget_ = std::move(o.budget_);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}
ArenaBuffer::Charge::~Charge() {
  if (budget_) budget_->Credit(bytes_);
}

PlanRecorder::PlanRecorder(size_t values, int steps)
    : sizes_(values, 0),
      first_(values, 0),
      last_(values, steps),
      over_(values, -1),
      strided_ok_(values, false) {}

ArenaLayout MakeLayout(const std::vector<size_t>& sizes, const std::vector<int>& first,
                       const std::vector<int>& last) {
  ArenaLayout plan;
  plan.slots.assign(sizes.size(), {});
  std::vector<size_t> order;
  for (size_t id = 0; id < sizes.size(); ++id)
    if (sizes[id] > 0) order.push_back(id);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  std::vector<size_t> placed;
  for (size_t id : order) {
    size_t need = (sizes[id] + 63) / 64 * 64;
    std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of overlapping lifetimes
    for (size_t p : placed)
      if (!(last[p] < first[id] || last[id] < first[p]))
        busy.emplace_back(plan.slots[p].offset,
                          plan.slots[p].offset + (plan.slots[p].size + 63) / 64 * 64);
    std::sort(busy.begin(), busy.end());
    size_t off = 0;
    for (auto [b, e] : busy) {
      if (off + need <= b) break;
      off = std::max(off, e);
    }
    plan.slots[id] = {off, sizes[id]};
    plan.total = std::max(plan.total, off + need);
    placed.push_back(id);
  }
  return plan;
}

ArenaLayout PlanRecorder::Finish(const std::vector<bool>& placeable) {
  const size_t n = sizes_.size();
  // Values freed before their producer ran, or never freed, keep conservative lifetimes.
  for (size_t id = 0; id < n; ++id)
    if (last_[id] < first_[id]) last_[id] = first_[id];
  // Values without a slot of their own, each a guest of a host value's slot:
  //  * in place of a residual: an output written over its residual (the same bytes; chains
  //    of residual blocks share one slot);
  //  * in place of a Concat: an input whose only reader is the Concat, written by its producer
  //    in the arena (a strided place also by a kernel that takes the stride), at its place in
  //    the Concat output's slot. Not for values written over a residual or written over (their
  //    slots are shared already). A Concat's output may itself be placed (contiguous places
  //    nest).
  struct Guest {
    int host = -1;
    int64_t offset = 0, stride = 0;
  };
  std::vector<Guest> guest(n);
  std::vector<bool> written_over(n, false);
  for (size_t id = 0; id < n; ++id)
    if (over_[id] >= 0) {
      guest[id].host = over_[id];
      written_over[static_cast<size_t>(over_[id])] = true;
    }
  for (const Placement& pl : places_) {
    const size_t v = static_cast<size_t>(pl.value), o = static_cast<size_t>(pl.concat_out);
    if (!placeable[v] || guest[v].host >= 0 || sizes_[v] == 0 || sizes_[o] == 0 || over_[o] >= 0 ||
        written_over[v] || written_over[o] || (pl.stride > 0 && !strided_ok_[v]))
      continue;
    guest[v] = {pl.concat_out, pl.offset, pl.stride};
  }
  auto host_of = [&](size_t v, int64_t* off) {
    for (; guest[v].host >= 0; v = static_cast<size_t>(guest[v].host)) *off += guest[v].offset;
    return v;
  };
  std::vector<size_t> own = sizes_;
  for (size_t id = 0; id < n; ++id) {
    if (guest[id].host < 0) continue;
    int64_t off = 0;
    const size_t r = host_of(id, &off);
    first_[r] = std::min(first_[r], first_[id]);
    last_[r] = std::max(last_[r], last_[id]);
    own[id] = 0;
  }
  ArenaLayout p = MakeLayout(own, first_, last_);
  for (size_t id = 0; id < n; ++id) {
    if (guest[id].host < 0) continue;
    int64_t off = 0;
    const size_t r = host_of(id, &off);
    p.slots[id] = {p.slots[r].offset + static_cast<size_t>(off), sizes_[id], guest[id].stride};
  }
  return p;
}

}  // namespace ferry::runtime

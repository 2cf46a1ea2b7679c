// cpu kernels: the comparison ops (Equal, Less, Greater, LessOrEqual, GreaterOrEqual on float32,
// int32, int64; Equal on bool too), the logic ops (And, Or, Xor, Not on bool), Where (bool
// condition, 1 / 4 / 8-byte values) and Cast between bool / uint8 / int8 / int32 / int64 /
// float32 (to float32, int32, int64, bool; float32 to an integer stays on the reference), all
// plain, with numpy (multidirectional) broadcasting planned once per shape set as elementwise.cc
// plans it: output dims of size 1 dropped, adjacent dims that broadcast the same way merged,
// the run walking the output as rows of the innermost merged dim, each row one vectorized call
// with every operand either advancing or held (logic.h's row tables: AVX-512, AVX2, baseline).
// Work is split over the threads in fixed contiguous chunks when the output is large. Results
// are exact (bit-identical to the reference). GlobalMaxPool (plain float32, rank >= 3): one
// vectorized maximum per (n, c) plane, planes over the threads; NaN propagates as in the
// reference.
#include "ops/cpu/logic.h"

#include <atomic>
#include <limits>
#include <type_traits>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"

namespace ferry::ops::cpu {

namespace logic_base {
#include "ops/cpu/logic_impl.inc"
}  // namespace logic_base

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define FERRY_LOGIC_VEC 1
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace logic_avx2 {
#include "ops/cpu/logic_impl.inc"
}  // namespace logic_avx2
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,prefer-vector-width=512")
namespace logic_avx512 {
#include "ops/cpu/logic_impl.inc"
}  // namespace logic_avx512
#pragma GCC pop_options
#endif

const LogicRows& BaselineLogic() {
  static const LogicRows t = logic_base::MakeTable("baseline");
  return t;
}

const LogicRows* Avx2Logic() {
#ifdef FERRY_LOGIC_VEC
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  static const LogicRows t = has ? logic_avx2::MakeTable("avx2") : LogicRows{};
  return has ? &t : nullptr;
#else
  return nullptr;
#endif
}

const LogicRows* Avx512Logic() {
#ifdef FERRY_LOGIC_VEC
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  static const LogicRows t = has ? logic_avx512::MakeTable("avx512") : LogicRows{};
  return has ? &t : nullptr;
#else
  return nullptr;
#endif
}

namespace {
std::atomic<const LogicRows*> g_forced{nullptr};
}  // namespace

void SetLogicTableForTesting(const LogicRows* t) {
  g_forced = t;
}

const LogicRows& LogicVec() {
  if (const LogicRows* f = g_forced.load(std::memory_order_relaxed)) return *f;
  static const LogicRows& t = Avx512Logic() ? *Avx512Logic()
                              : Avx2Logic() ? *Avx2Logic()
                                            : BaselineLogic();
  return t;
}

namespace {

// Below this many output elements a node runs on one thread.
constexpr int64_t kParallelMin = 1 << 15;

enum class Kind : uint8_t { kCmp, kLogic, kNot, kWhere, kCast, kArith };

struct LogicState : KernelState {
  StateKey key;
  Shape out_shape;
  // Merged output dims (outer first), and per operand its element stride per dim (0: held).
  std::vector<int64_t> dims;
  std::vector<int64_t> strides[3];
  int64_t total = 0;
  int op = 0, type = 0;  // table indices
  size_t out_size = 1, in_size[3] = {1, 1, 1};
};

// Plans the broadcast of `ins` into `out`.
void Plan(const std::vector<Shape>& ins, const Shape& out, LogicState* st) {
  const size_t r = out.size(), k = ins.size();
  auto padded = [&](const Shape& s, size_t d) {
    const size_t lead = r - s.size();
    return d < lead ? int64_t{1} : s[d - lead];
  };
  std::vector<int64_t> dims;
  std::vector<unsigned> moves;  // bit i: operand i advances
  for (size_t d = 0; d < r; ++d) {
    if (out[d] == 1) continue;
    unsigned mv = 0;
    for (size_t i = 0; i < k; ++i)
      if (padded(ins[i], d) != 1) mv |= 1u << i;
    if (!dims.empty() && moves.back() == mv) {
      dims.back() *= out[d];
    } else {
      dims.push_back(out[d]);
      moves.push_back(mv);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    moves.push_back((1u << k) - 1);
  }
  st->dims = dims;
  for (size_t i = 0; i < k; ++i) {
    st->strides[i].assign(dims.size(), 0);
    int64_t acc = 1;
    for (size_t d = dims.size(); d-- > 0;) {
      if (moves[d] & (1u << i)) {
        st->strides[i][d] = acc;
        acc *= dims[d];
      }
    }
  }
  st->total = NumElements(out);
}

// Walks the output rows of [s, e): fn(row start offsets per operand, output offset, length,
// which operands advance in the row).
template <typename F>
void Walk(const LogicState* st, size_t k, int64_t s, int64_t e, F&& fn) {
  const size_t nd = st->dims.size();
  const int64_t inner = st->dims[nd - 1];
  int64_t r = s / inner, c = s % inner;
  std::vector<int64_t> idx(nd, 0);
  int64_t off[3] = {0, 0, 0}, step[3] = {0, 0, 0};
  for (size_t i = 0; i < k; ++i) step[i] = st->strides[i][nd - 1];
  for (size_t d = nd - 1; d-- > 0;) {
    idx[d] = r % st->dims[d];
    r /= st->dims[d];
    for (size_t i = 0; i < k; ++i) off[i] += idx[d] * st->strides[i][d];
  }
  for (int64_t pos = s; pos < e;) {
    const int64_t len = std::min(inner - c, e - pos);
    int64_t at[3];
    for (size_t i = 0; i < k; ++i) at[i] = off[i] + c * step[i];
    fn(at, pos, len);
    pos += len;
    c = 0;
    for (size_t d = nd - 1; d-- > 0;) {
      for (size_t i = 0; i < k; ++i) off[i] += st->strides[i][d];
      if (++idx[d] < st->dims[d]) break;
      for (size_t i = 0; i < k; ++i) off[i] -= idx[d] * st->strides[i][d];
      idx[d] = 0;
    }
  }
}

bool PlainTensors(const OpContext& ctx, const NodeSlot& slot, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!ctx.has_input(i) || !ctx.input_is_tensor(i)) return false;
    if (slot.in_layouts.size() > i && slot.in_layouts[i] != Layout::kPlain) return false;
  }
  return true;
}

int CmpType(DType t) {
  switch (t) {
    case DType::kFloat:
      return 0;
    case DType::kInt32:
      return 1;
    case DType::kInt64:
      return 2;
    case DType::kBool:
      return 3;
    default:
      return -1;
  }
}

int CastFrom(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kUint8:
      return 0;
    case DType::kInt8:
      return 1;
    case DType::kInt32:
      return 2;
    case DType::kInt64:
      return 3;
    case DType::kFloat:
      return 4;
    default:
      return -1;
  }
}

int CastTo(DType t) {
  switch (t) {
    case DType::kFloat:
      return 0;
    case DType::kInt32:
      return 1;
    case DType::kInt64:
      return 2;
    case DType::kBool:
      return 3;
    default:
      return -1;
  }
}

int SizeIndex(size_t bytes) {
  return bytes == 1 ? 0 : bytes == 4 ? 1 : bytes == 8 ? 2 : -1;
}

// The shared prepare: validates with the reference, plans the broadcast once per shape set.
template <Kind kKind, int kOp>
Status Prepare(OpContext& ctx, NodeSlot& slot) {
  const size_t n = kKind == Kind::kWhere                           ? 3
                   : (kKind == Kind::kNot || kKind == Kind::kCast) ? 1
                                                                   : 2;
  bool ok = PlainTensors(ctx, slot, n);
  int op = kOp, type = 0;
  DType out_type = DType::kBool;
  if (ok) {
    const DType t0 = ctx.input(0).dtype();
    if constexpr (kKind == Kind::kCmp) {
      type = CmpType(t0);
      ok = type >= 0 && ctx.input(1).dtype() == t0 && (type != 3 || kOp == 0);
    } else if constexpr (kKind == Kind::kArith) {
      type = t0 == DType::kInt32 ? 0 : t0 == DType::kInt64 ? 1 : -1;
      ok = type >= 0 && ctx.input(1).dtype() == t0;
      out_type = t0;
    } else if constexpr (kKind == Kind::kLogic || kKind == Kind::kNot) {
      ok = t0 == DType::kBool && (n == 1 || ctx.input(1).dtype() == DType::kBool);
    } else if constexpr (kKind == Kind::kWhere) {
      out_type = ctx.input(1).dtype();
      type = SizeIndex(DTypeSize(out_type));
      ok = t0 == DType::kBool && ctx.input(2).dtype() == out_type && type >= 0 &&
           out_type != DType::kString;
    } else {
      const auto to = DTypeFromCode(static_cast<int>(ctx.attr_int("to", 0)));
      const int from = CastFrom(t0), dst = to ? CastTo(*to) : -1;
      ok = from >= 0 && dst >= 0 && LogicVec().cast[from][dst] != nullptr;
      op = from, type = dst;
      if (ok) out_type = *to;
    }
  }
  if (!ok) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<LogicState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, n));
    auto fresh = std::make_unique<LogicState>();
    fresh->key = std::move(key);
    fresh->out_shape = decl[0].shape;
    std::vector<Shape> ins;
    for (size_t i = 0; i < n; ++i) {
      ins.push_back(ctx.input(i).shape());
      fresh->in_size[i] = DTypeSize(ctx.input(i).dtype());
    }
    Plan(ins, fresh->out_shape, fresh.get());
    fresh->out_size = DTypeSize(out_type);
    slot.state = std::move(fresh);
    st = static_cast<LogicState*>(slot.state.get());
  }
  st->op = op;
  st->type = type;
  slot.out_layouts.assign(1, Layout::kPlain);
  ctx.set_output(0, out_type, st->out_shape);
  return Status::Ok();
}

template <Kind kKind, int kOp>
void Run(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const LogicState*>(slot.state.get());
  if (st->total == 0) return;
  const LogicRows& t = LogicVec();
  const size_t n = kKind == Kind::kWhere                           ? 3
                   : (kKind == Kind::kNot || kKind == Kind::kCast) ? 1
                                                                   : 2;
  const std::byte* in[3] = {};
  for (size_t i = 0; i < n; ++i) in[i] = static_cast<const std::byte*>(ctx.input(i).raw());
  auto* out = static_cast<std::byte*>(ctx.output(0).raw());
  const size_t os = st->out_size;
  auto kind = [](int64_t a, int64_t b) { return a && b ? 0 : a ? 1 : 2; };
  ParallelRange(st->total, kParallelMin, [&](int64_t s, int64_t e) {
    Walk(st, n, s, e, [&](const int64_t* at, int64_t pos, int64_t len) {
      const size_t nd = st->dims.size();
      int64_t adv[3];
      for (size_t i = 0; i < n; ++i) adv[i] = st->strides[i][nd - 1];
      auto* y = reinterpret_cast<uint8_t*>(out + pos * static_cast<int64_t>(os));
      const void* a = in[0] + at[0] * static_cast<int64_t>(st->in_size[0]);
      if constexpr (kKind == Kind::kArith) {
        const void* b = in[1] + at[1] * static_cast<int64_t>(st->in_size[1]);
        t.arith[kOp][st->type][kind(adv[0], adv[1])](a, b, y, len);
      } else if constexpr (kKind == Kind::kCmp || kKind == Kind::kLogic) {
        const void* b = in[1] + at[1] * static_cast<int64_t>(st->in_size[1]);
        const int kd = kind(adv[0], adv[1]);
        if constexpr (kKind == Kind::kCmp)
          t.cmp[st->op][st->type][kd](a, b, y, len);
        else
          t.logic[kOp][kd](a, b, y, len);
      } else if constexpr (kKind == Kind::kNot) {
        t.not_row(static_cast<const uint8_t*>(a), y, len);  // same shape: advances
      } else if constexpr (kKind == Kind::kWhere) {
        const void* x = in[1] + at[1] * static_cast<int64_t>(st->in_size[1]);
        const void* z = in[2] + at[2] * static_cast<int64_t>(st->in_size[2]);
        const int m = (adv[0] ? 4 : 0) | (adv[1] ? 2 : 0) | (adv[2] ? 1 : 0);
        t.where[st->type][m](static_cast<const uint8_t*>(a), x, z, y, len);
      } else {
        t.cast[st->op][st->type](a, y, len);
      }
    });
  });
}

// GlobalMaxPool on a plain float32 [N, C, spatial...] input: one row maximum per plane.
Status PrepareGlobalMax(OpContext& ctx, NodeSlot& slot) {
  if (!PlainTensors(ctx, slot, 1) || ctx.input(0).dtype() != DType::kFloat ||
      ctx.input(0).rank() < 3) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<LogicState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, 1));
    auto fresh = std::make_unique<LogicState>();
    fresh->key = std::move(key);
    fresh->out_shape = decl[0].shape;
    const Shape& x = ctx.input(0).shape();
    fresh->total = x[0] * x[1];                                           // planes
    fresh->dims = {NumElements(x) / std::max<int64_t>(1, fresh->total)};  // plane size
    slot.state = std::move(fresh);
    st = static_cast<LogicState*>(slot.state.get());
  }
  slot.out_layouts.assign(1, Layout::kPlain);
  ctx.set_output(0, DType::kFloat, st->out_shape);
  return Status::Ok();
}

void RunGlobalMax(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const LogicState*>(slot.state.get());
  const int64_t plane = st->dims[0];
  if (st->total == 0 || plane == 0) return;
  const float* x = ctx.input(0).data<float>();
  float* y = ctx.output(0).data<float>();
  const auto row = LogicVec().max_row;
  ParallelRange(st->total, std::max<int64_t>(1, kParallelMin / plane), [&](int64_t s, int64_t e) {
    for (int64_t p = s; p < e; ++p) y[p] = row(x + p * plane, plane);
  });
}

template <Kind kKind, int kOp>
constexpr KernelDef Def(std::string_view name, int since) {
  return {"", name, since, 1000, nullptr, 0, 0, Prepare<kKind, kOp>, Run<kKind, kOp>};
}

constexpr KernelDef kKernels[] = {
    Def<Kind::kCmp, 0>("Equal", 7),
    Def<Kind::kCmp, 1>("Less", 7),
    Def<Kind::kCmp, 2>("Greater", 7),
    Def<Kind::kCmp, 3>("LessOrEqual", 12),
    Def<Kind::kCmp, 4>("GreaterOrEqual", 12),
    Def<Kind::kLogic, 0>("And", 7),
    Def<Kind::kLogic, 1>("Or", 7),
    Def<Kind::kLogic, 2>("Xor", 7),
    Def<Kind::kNot, 0>("Not", 1),
    Def<Kind::kWhere, 0>("Where", 9),
    Def<Kind::kCast, 0>("Cast", 6),
    {"", "GlobalMaxPool", 1, 1000, nullptr, 0, 0, PrepareGlobalMax, RunGlobalMax},
};

}  // namespace

bool IntArithInputs(const OpContext& ctx) {
  if (ctx.num_inputs() < 2 || !ctx.input_is_tensor(0) || !ctx.input_is_tensor(1)) return false;
  const DType t = ctx.input(0).dtype();
  return (t == DType::kInt32 || t == DType::kInt64) && ctx.input(1).dtype() == t;
}

struct IntArithState : LogicState {};

Status PrepareIntArith(OpContext& ctx, NodeSlot& slot, int op) {
  if (slot.state && !dynamic_cast<IntArithState*>(slot.state.get())) slot.state.reset();
  Status s = op == 0   ? Prepare<Kind::kArith, 0>(ctx, slot)
             : op == 1 ? Prepare<Kind::kArith, 1>(ctx, slot)
                       : Prepare<Kind::kArith, 2>(ctx, slot);
  // Mark the state as this kernel's (Prepare builds a LogicState; move it into the subtype).
  if (s.ok() && !slot.declined && slot.state && !dynamic_cast<IntArithState*>(slot.state.get())) {
    auto* ls = static_cast<LogicState*>(slot.state.get());
    auto mine = std::make_unique<IntArithState>();
    static_cast<LogicState&>(*mine) = std::move(*ls);
    slot.state = std::move(mine);
  }
  return s;
}

bool HasIntArithState(const NodeSlot& slot) {
  return dynamic_cast<const IntArithState*>(slot.state.get()) != nullptr;
}

void RunIntArith(OpContext& ctx, NodeSlot& slot, int op) {
  if (op == 0) return Run<Kind::kArith, 0>(ctx, slot);
  if (op == 1) return Run<Kind::kArith, 1>(ctx, slot);
  Run<Kind::kArith, 2>(ctx, slot);
}

std::span<const KernelDef> LogicKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu

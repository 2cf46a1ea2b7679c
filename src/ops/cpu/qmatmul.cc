// cpu kernels for dynamic-quantized and int8 MatMul: DynamicQuantizeLinear, MatMulInteger,
// QLinearMatMul, and the pattern `MatMulInteger -> Cast(float) -> Mul(scale) [-> Add(bias)]`
// (with the scale's own `Mul(a_scale, b_scale)` absorbed) that `ferry quantize --mode dynamic`
// and ONNX Runtime's quantize_dynamic write. All bit-exact with the reference kernels
// (ops/reference/quant.cc). The integer products run on oneDNN's int8 matmul where the CPU has
// VNNI and B is a constant 2-D int8 matrix without zero point (QGemmUseOneDnn), else on the own
// int8 GEMM (qgemm.h); the float epilogue of the pattern is float(acc) * (a_scale * b_scale[n])
// [+ bias[n]], unfused, in the graph's order. Without AVX2 every kernel here declines.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"
#include "ops/cpu/qgemm.h"

#define FERRY_AVX2 __attribute__((target("avx2")))

namespace ferry::ops::cpu {

namespace {

bool PlainInput(const OpContext& ctx, const NodeSlot& slot, size_t i) {
  return ctx.has_input(i) && ctx.input_is_tensor(i) &&
         (slot.in_layouts.size() <= i || slot.in_layouts[i] == Layout::kPlain);
}
bool Int8(DType t) {
  return t == DType::kUint8 || t == DType::kInt8;
}

// ---- DynamicQuantizeLinear ----
// The reference: scale = (max(0, max x) - min(0, min x)) / 255 over non-NaN x, zero point
// saturate(round(0 - min / scale)), y = saturate(round(x / scale) + zp) (NaN -> zp); x / scale
// is a division (not a multiply by the reciprocal), rounding half to even.
float RoundSat(float v, float zp) {
  if (std::isnan(v)) v = 0;
  return std::clamp(std::nearbyint(v) + zp, 0.f, 255.f);
}

FERRY_AVX2 void MinMaxAvx2(const float* x, int64_t n, float* lo, float* hi) {
  __m256 mn = _mm256_setzero_ps(), mx = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    mn = _mm256_min_ps(v, mn);  // NaN in v: keeps mn
    mx = _mm256_max_ps(v, mx);
  }
  float a[8], b[8];
  _mm256_storeu_ps(a, mn);
  _mm256_storeu_ps(b, mx);
  for (int k = 0; k < 8; ++k) {
    *lo = std::min(*lo, a[k]);
    *hi = std::max(*hi, b[k]);
  }
  for (; i < n; ++i) {
    if (std::isnan(x[i])) continue;
    *lo = std::min(*lo, x[i]);
    *hi = std::max(*hi, x[i]);
  }
}

FERRY_AVX2 void QuantizeAvx2(const float* x, int64_t n, float scale, float zp, uint8_t* y) {
  const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(zp);
  const __m256 lo = _mm256_setzero_ps(), hi = _mm256_set1_ps(255.f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + i), s);
    v = _mm256_andnot_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), v);  // NaN -> 0
    v = _mm256_add_ps(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
    v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
    const __m256i q = _mm256_cvttps_epi32(v);
    const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), _mm_packus_epi16(w, w));
  }
  for (; i < n; ++i) y[i] = static_cast<uint8_t>(RoundSat(x[i] / scale, zp));
}

bool HasAvx2() {
  static const bool ok = __builtin_cpu_supports("avx2");
  return ok;
}

// Scale and zero point of x (n floats), as the reference computes them.
void DynamicParams(const float* x, int64_t n, float* scale, uint8_t* zp) {
  constexpr int64_t kChunk = 1 << 16;
  const int64_t chunks = std::max<int64_t>(1, (n + kChunk - 1) / kChunk);
  std::vector<float> lo(static_cast<size_t>(chunks), 0.f), hi(static_cast<size_t>(chunks), 0.f);
  ParallelRange(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t b = c * kChunk, e = std::min(n, b + kChunk);
      float* l = &lo[static_cast<size_t>(c)];
      float* h = &hi[static_cast<size_t>(c)];
      if (HasAvx2()) {
        MinMaxAvx2(x + b, e - b, l, h);
      } else {
        for (int64_t i = b; i < e; ++i) {
          if (std::isnan(x[i])) continue;
          *l = std::min(*l, x[i]);
          *h = std::max(*h, x[i]);
        }
      }
    }
  });
  float x_min = 0.f, x_max = 0.f;
  for (int64_t c = 0; c < chunks; ++c) {
    x_min = std::min(x_min, lo[static_cast<size_t>(c)]);
    x_max = std::max(x_max, hi[static_cast<size_t>(c)]);
  }
  const float s = (x_max - x_min) / 255.f;
  float z = 0.f;
  if (s != 0.f) z = RoundSat(0.f - x_min / s, 0.f);
  *scale = s;
  *zp = static_cast<uint8_t>(z);
}

void Quantize(const float* x, int64_t n, float scale, uint8_t zp, uint8_t* y) {
  if (scale == 0.f) {
    std::memset(y, zp, static_cast<size_t>(n));
    return;
  }
  ParallelRange(n, 1 << 15, [&](int64_t b, int64_t e) {
    if (HasAvx2()) {
      QuantizeAvx2(x + b, e - b, scale, static_cast<float>(zp), y + b);
    } else {
      for (int64_t i = b; i < e; ++i)
        y[i] = static_cast<uint8_t>(RoundSat(x[i] / scale, static_cast<float>(zp)));
    }
  });
}

Status PrepareDynamicQuantizeLinear(OpContext& ctx, NodeSlot& slot) {
  if (!PlainInput(ctx, slot, 0) || ctx.input(0).dtype() != DType::kFloat) {
    slot.declined = true;
    return Status::Ok();
  }
  FERRY_RETURN_IF_ERROR(ReferenceDeclare(ctx, slot, 1).status());
  slot.out_layouts.assign(3, Layout::kPlain);
  ctx.set_output(0, DType::kUint8, ctx.input(0).shape());
  ctx.set_output(1, DType::kFloat, {});
  ctx.set_output(2, DType::kUint8, {});
  return Status::Ok();
}

void RunDynamicQuantizeLinear(OpContext& ctx, NodeSlot&) {
  const Tensor& x = ctx.input(0);
  float scale = 0;
  uint8_t zp = 0;
  DynamicParams(x.data<float>(), x.size(), &scale, &zp);
  ctx.output(1).data<float>()[0] = scale;
  ctx.output(2).data<uint8_t>()[0] = zp;
  Quantize(x.data<float>(), x.size(), scale, zp, ctx.output(0).data<uint8_t>());
}

// ---- int8 matmul geometry (numpy batch broadcasting, as the reference) ----
struct QDims {
  int64_t m = 1, k = 1, n = 1;
  Shape a_batch, b_batch, batch, out;
};

bool Broadcast(const Shape& a, const Shape& b, Shape* out) {
  const size_t r = std::max(a.size(), b.size());
  out->assign(r, 1);
  for (size_t i = 0; i < r; ++i) {
    const int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x != y && x != 1 && y != 1) return false;
    (*out)[i] = x == 1 ? y : x;
  }
  return true;
}

// A [.., m, k] (or [k]), B [.., k, n] (rank >= 2).
bool GetDims(const Shape& a, const Shape& b, QDims* d) {
  if (a.empty() || b.size() < 2) return false;
  d->k = a.back();
  d->m = a.size() >= 2 ? a[a.size() - 2] : 1;
  d->n = b.back();
  if (b[b.size() - 2] != d->k) return false;
  d->a_batch.assign(a.begin(), a.end() - std::min<size_t>(a.size(), 2));
  d->b_batch.assign(b.begin(), b.end() - 2);
  if (!Broadcast(d->a_batch, d->b_batch, &d->batch)) return false;
  d->out = d->batch;
  if (a.size() >= 2) d->out.push_back(d->m);
  d->out.push_back(d->n);
  return true;
}

// Offset (in batch matrices) of broadcast batch index t into `in` (right-aligned in `out`).
int64_t BatchOffset(const Shape& in, const Shape& out, int64_t t) {
  int64_t off = 0, stride = 1;
  for (size_t i = out.size(); i-- > 0;) {
    const int64_t o = t % out[i];
    t /= out[i];
    const size_t lead = out.size() - in.size();
    if (i >= lead) {
      const int64_t dim = in[i - lead];
      if (dim != 1) off += o * stride;
      stride *= dim;
    }
  }
  return off;
}

// A zero point / scale that is one value, or a rank-1 tensor of n values.
bool ScalarOrVector(const OpContext& ctx, size_t i, int64_t n) {
  if (!ctx.has_input(i)) return true;
  if (!ctx.input_is_tensor(i)) return false;
  const Tensor& t = ctx.input(i);
  return (t.size() == 1 && t.rank() <= 1) || (t.rank() == 1 && t.dim(0) == n);
}

std::vector<int32_t> ZeroPoints(const OpContext& ctx, size_t i) {
  std::vector<int32_t> z;
  if (!ctx.has_input(i)) return z;
  const Tensor& t = ctx.input(i);
  for (int64_t k = 0; k < t.size(); ++k) z.push_back(static_cast<int32_t>(t.GetAsInt64(k)));
  return z;
}

// The packed B matrices of a batched int8 MatMul.
struct QPackedSet {
  std::vector<QPackedB> b;
  size_t bytes() const {
    size_t n = 0;
    for (const QPackedB& p : b)
      n += static_cast<size_t>(p.kp * p.npad) + (p.colsum.size() + p.zb.size()) * sizeof(int32_t);
    return n;
  }
};

struct QState : KernelState {
  StateKey key;
  QIsa isa = QIsa::kNone;
  // oneDNN's int8 matmul (QGemmUseOneDnn): A as [rows, k], B reordered once, s32 out.
  bool onednn = false;
  int64_t rows = 0;
  dnnl::memory::desc a_md, c_md;
  dnnl::memory b_mem;
  std::optional<dnnl::matmul> mm;
  QDims d;
  PackedPtr b_buf;             // oneDNN's B bytes (shared)
  bool b_packed_once = false;  // B (and its zero point) constant: packed at prepare, shared
  std::shared_ptr<const QPackedSet> packed;  // one per B batch matrix
  std::vector<float> scale, bias;            // pattern: per column (npad)
  std::vector<int32_t> acc;                  // QLinearMatMul: int32 products
};

bool Const(const NodeSlot& slot, size_t i) {
  return slot.const_inputs.size() > i && slot.const_inputs[i];
}

// Packs every B batch matrix (input bi, zero point input zi): once per session when both are
// constant (b_packed_once), else into this context's own copy.
void PackAll(const OpContext& ctx, const NodeSlot& slot, size_t bi, size_t zi, QState* st) {
  const Tensor& b = ctx.input(bi);
  const auto pack = [&] {
    const std::vector<int32_t> zb = ZeroPoints(ctx, zi);
    const int64_t nb = NumElements(st->d.b_batch);
    auto set = std::make_shared<QPackedSet>();
    set->b.assign(static_cast<size_t>(nb), QPackedB{});
    const auto* base = static_cast<const int8_t*>(b.raw());
    for (int64_t t = 0; t < nb; ++t)
      QPackB(st->isa, base + t * st->d.k * st->d.n, b.dtype() == DType::kInt8, st->d.k, st->d.n,
             st->d.n, zb.empty() ? nullptr : zb.data(), zb.size() == 1,
             &set->b[static_cast<size_t>(t)]);
    return set;
  };
  const void* zp = ctx.has_input(zi) ? ctx.input(zi).raw() : nullptr;
  const std::string tag = fmt::format("q{} k{} n{} b{} zp{}", static_cast<int>(st->isa), st->d.k,
                                      st->d.n, NumElements(st->d.b_batch), zp);
  st->packed = SharedPack<QPackedSet>(slot, st->b_packed_once, b.raw(), tag, pack);
}

// oneDNN takes: B int8 2-D without a zero point (or an all-zero one), A's zero point one value,
// a non-empty problem.
bool OneDnnFits(const OpContext& ctx, size_t bi, size_t azi, size_t bzi, const QDims& d) {
  if (!QGemmUseOneDnn() || ctx.input(bi).dtype() != DType::kInt8 || !d.b_batch.empty() ||
      d.k == 0 || d.m * d.n == 0 || NumElements(d.batch) == 0)
    return false;
  if (ctx.has_input(azi) && ctx.input(azi).size() != 1) return false;
  if (ctx.has_input(bzi))
    for (int32_t z : ZeroPoints(ctx, bzi))
      if (z != 0) return false;
  return true;
}

void BuildOneDnn(const OpContext& ctx, NodeSlot& slot, size_t ai, size_t bi, QState* st) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  dnnl::engine& eng = slot.provider->engine();
  const QDims& d = st->d;
  st->rows = NumElements(d.batch) * d.m;
  const dt a_dt = ctx.input(ai).dtype() == DType::kInt8 ? dt::s8 : dt::u8;
  st->a_md = dnnl::memory::desc({st->rows, d.k}, a_dt, tag::ab);
  st->c_md = dnnl::memory::desc({st->rows, d.n}, dt::s32, tag::ab);
  const dnnl::memory::desc b_any({d.k, d.n}, dt::s8, tag::any), b_md({d.k, d.n}, dt::s8, tag::ab);
  dnnl::primitive_attr attr;
  attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(st->a_md, b_any, st->c_md), attr, eng);
  st->b_buf = SharedReorder(slot, true, ctx.input(bi).raw(), b_md, pd.weights_desc(), eng,
                            slot.provider->stream(), "qmatmul");
  st->b_mem = dnnl::memory(pd.weights_desc(), eng, const_cast<float*>(st->b_buf->data()));
  st->mm.emplace(pd);
  st->onednn = true;
}

// Builds (or keeps) the state for A = input ai, B = input bi with zero points azi / bzi;
// returns null when the kernel declines.
QState* PrepareInt8MatMul(OpContext& ctx, NodeSlot& slot, size_t ai, size_t bi, size_t azi,
                          size_t bzi) {
  const QIsa isa = QGemmIsa();
  if (isa == QIsa::kNone || !PlainInput(ctx, slot, ai) || !PlainInput(ctx, slot, bi) ||
      !Int8(ctx.input(ai).dtype()) || !Int8(ctx.input(bi).dtype()))
    return nullptr;
  auto* st = static_cast<QState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (st && st->key == key && st->isa == isa) return st;
  auto fresh = std::make_unique<QState>();
  fresh->key = std::move(key);
  fresh->isa = isa;
  if (!GetDims(ctx.input(ai).shape(), ctx.input(bi).shape(), &fresh->d) ||
      !ScalarOrVector(ctx, azi, fresh->d.m) || !ScalarOrVector(ctx, bzi, fresh->d.n) ||
      (ctx.input(ai).rank() < 2 && ctx.has_input(azi) && ctx.input(azi).size() != 1))
    return nullptr;
  for (size_t z : {azi, bzi})
    if (ctx.has_input(z) && !Int8(ctx.input(z).dtype())) return nullptr;
  fresh->b_packed_once = Const(slot, bi) && (!ctx.has_input(bzi) || Const(slot, bzi));
  if (fresh->b_packed_once && OneDnnFits(ctx, bi, azi, bzi, fresh->d))
    BuildOneDnn(ctx, slot, ai, bi, fresh.get());
  else if (fresh->b_packed_once)
    PackAll(ctx, slot, bi, bzi, fresh.get());
  slot.state = std::move(fresh);
  return static_cast<QState*>(slot.state.get());
}

// Runs the batched GEMM of the state into `out` (i32 or the float epilogue), ldc = n.
void RunInt8MatMul(OpContext& ctx, NodeSlot& slot, QState* st, size_t ai, size_t bi, size_t azi,
                   size_t bzi, QOutput out) {
  if (st->onednn) {
    int32_t* c = out.i32;
    if (!c) {
      st->acc.resize(static_cast<size_t>(st->rows * st->d.n));
      c = st->acc.data();
    }
    int32_t za = ctx.has_input(azi) ? static_cast<int32_t>(ctx.input(azi).GetAsInt64(0)) : 0;
    dnnl::engine& eng = slot.provider->engine();
    dnnl::memory a_mem(st->a_md, eng, const_cast<void*>(ctx.input(ai).raw()));
    dnnl::memory c_mem(st->c_md, eng, c);
    dnnl::memory zp_mem({{1}, dnnl::memory::data_type::s32, dnnl::memory::format_tag::x}, eng, &za);
    st->mm->execute(slot.provider->stream(), {{DNNL_ARG_SRC, a_mem},
                                              {DNNL_ARG_WEIGHTS, st->b_mem},
                                              {DNNL_ARG_DST, c_mem},
                                              {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp_mem}});
    slot.provider->stream().wait();
    if (!out.i32) QEpilogue(c, st->rows, st->d.n, out);
    return;
  }
  if (!st->b_packed_once) PackAll(ctx, slot, bi, bzi, st);
  const QDims& d = st->d;
  const Tensor& a = ctx.input(ai);
  const std::vector<int32_t> za = ZeroPoints(ctx, azi);
  const int64_t nb = NumElements(d.batch);
  int32_t* i32 = out.i32;
  float* f32 = out.f32;
  out.ldc = d.n;
  if (d.b_batch.empty() && za.size() <= 1) {  // one B: A's batch is just more rows
    QGemm(st->packed->b[0], a.raw(), a.dtype() == DType::kInt8, nb * d.m, d.k,
          za.empty() ? nullptr : za.data(), true, out);
    return;
  }
  for (int64_t t = 0; t < nb; ++t) {
    const int64_t ao = BatchOffset(d.a_batch, d.batch, t);
    const int64_t bo = BatchOffset(d.b_batch, d.batch, t);
    if (i32) out.i32 = i32 + t * d.m * d.n;
    if (f32) out.f32 = f32 + t * d.m * d.n;
    QGemm(st->packed->b[static_cast<size_t>(bo)],
          static_cast<const int8_t*>(a.raw()) + ao * d.m * d.k, a.dtype() == DType::kInt8, d.m, d.k,
          za.empty() ? nullptr : za.data(), za.size() == 1, out);
  }
}

// ---- MatMulInteger ----
Status PrepareMatMulInteger(OpContext& ctx, NodeSlot& slot) {
  FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, ctx.num_inputs()));
  QState* st = PrepareInt8MatMul(ctx, slot, 0, 1, 2, 3);
  if (!st || decl[0].shape != st->d.out) {
    slot.declined = true;
    slot.state.reset();
    return Status::Ok();
  }
  slot.out_layouts.assign(1, Layout::kPlain);
  ctx.set_output(0, DType::kInt32, st->d.out);
  return Status::Ok();
}

void RunMatMulInteger(OpContext& ctx, NodeSlot& slot) {
  auto* st = static_cast<QState*>(slot.state.get());
  QOutput out;
  out.i32 = ctx.output(0).data<int32_t>();
  RunInt8MatMul(ctx, slot, st, 0, 1, 2, 3, out);
}

// ---- QLinearMatMul ----
// The int32 products on the GEMM, then the reference's requantization: multiplier =
// a_scale[i] * b_scale[j] / y_scale in float, y = saturate(round(float(acc) * multiplier) + y_zp).
Status PrepareQLinearMatMul(OpContext& ctx, NodeSlot& slot) {
  FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, ctx.num_inputs()));
  QState* st = PrepareInt8MatMul(ctx, slot, 0, 3, 2, 5);
  // Float32 scales only (Requantize reads them as float); float16 ones run the reference.
  if (!st || decl[0].shape != st->d.out || !ctx.input_is_tensor(1) || !ctx.input_is_tensor(4) ||
      !ctx.input_is_tensor(6) || !ctx.input_is_tensor(7) || ctx.input(1).dtype() != DType::kFloat ||
      ctx.input(4).dtype() != DType::kFloat) {
    slot.declined = true;
    slot.state.reset();
    return Status::Ok();
  }
  slot.out_layouts.assign(1, Layout::kPlain);
  ctx.set_output(0, decl[0].dtype, st->d.out);
  return Status::Ok();
}

template <typename T>
void Requantize(const OpContext& ctx, const QDims& d, const int32_t* acc, T* y) {
  const Tensor& as = ctx.input(1);
  const Tensor& bs = ctx.input(4);
  const float y_scale = static_cast<float>(ctx.input(6).GetAsDouble(0));
  const float y_zp = static_cast<float>(ctx.input(7).GetAsInt64(0));
  const float lo = static_cast<float>(std::numeric_limits<T>::min());
  const float hi = static_cast<float>(std::numeric_limits<T>::max());
  const float* pa = as.data<float>();
  const float* pb = bs.data<float>();
  const int64_t rows = NumElements(d.batch) * d.m;
  std::vector<float> mult(static_cast<size_t>(d.n));
  for (int64_t r = 0; r < rows; ++r) {
    const float sa = pa[as.size() == 1 ? 0 : r % d.m];
    for (int64_t j = 0; j < d.n; ++j)
      mult[static_cast<size_t>(j)] = sa * pb[bs.size() == 1 ? 0 : j] / y_scale;
    for (int64_t j = 0; j < d.n; ++j) {
      float v = static_cast<float>(acc[r * d.n + j]) * mult[static_cast<size_t>(j)];
      if (std::isnan(v)) v = 0;
      y[r * d.n + j] = static_cast<T>(std::clamp(std::nearbyint(v) + y_zp, lo, hi));
    }
  }
}

void RunQLinearMatMul(OpContext& ctx, NodeSlot& slot) {
  auto* st = static_cast<QState*>(slot.state.get());
  st->acc.resize(static_cast<size_t>(NumElements(st->d.out)));
  QOutput out;
  out.i32 = st->acc.data();
  RunInt8MatMul(ctx, slot, st, 0, 3, 2, 5, out);
  Tensor& y = ctx.output(0);
  if (y.dtype() == DType::kUint8)
    Requantize(ctx, st->d, st->acc.data(), y.data<uint8_t>());
  else
    Requantize(ctx, st->d, st->acc.data(), y.data<int8_t>());
}

// ---- the dynamic chain pattern ----
// Inputs: 0 A (uint8/int8), 1 B, 2 a_zero_point, 3 b_zero_point, 4 s1, 5 s2 (the scale is s1 *
// s2, or s1 alone when s2 is absent), 6 bias.
// A constant of one value or of n values along its last axis (every other dim 1).
bool RowConstant(const Tensor* t, int64_t n) {
  if (t == nullptr || t->dtype() != DType::kFloat) return false;
  if (t->size() == 1) return true;
  return t->rank() >= 1 && t->shape().back() == n && t->size() == n;
}

const KernelDef* DynamicMatMulKernel();

bool MatchDynamicMatMul(const GraphView& g, size_t host, PatternMatch* m) {
  if (!IsOp(g, host, "MatMulInteger") || g.output(host, 0) < 0) return false;
  const Tensor* b = g.input(host, 1) >= 0 ? g.constant(g.input(host, 1)) : nullptr;
  if (b == nullptr || b->rank() < 2) return false;
  const int64_t n = b->shape().back();
  size_t cast, mul;
  if (!OnlyReader(g, g.output(host, 0), &cast) || !IsOp(g, cast, "Cast") ||
      g.node(cast).attr_int("to", 0) != static_cast<int64_t>(DType::kFloat) ||
      g.output(cast, 0) < 0)
    return false;
  const int mf = g.output(cast, 0);
  if (!OnlyReader(g, mf, &mul) || !IsOp(g, mul, "Mul") || g.output(mul, 0) < 0) return false;
  const int sc = Other(g, mul, mf);
  if (sc < 0) return false;
  m->absorbed = {cast};
  m->inputs = {g.input(host, 0), g.input(host, 1), g.input(host, 2), g.input(host, 3), sc, -1, -1};
  // The scale's own Mul, when it runs between the host and the Mul (the quantizer's order).
  for (size_t s = host + 1; s < mul; ++s) {
    if (g.output(s, 0) != sc) continue;
    size_t only;
    if (!IsOp(g, s, "Mul") || !OnlyReader(g, sc, &only) || only != mul || g.input(s, 0) < 0 ||
        g.input(s, 1) < 0)
      return false;
    m->inputs[4] = g.input(s, 0);
    m->inputs[5] = g.input(s, 1);
    m->absorbed.push_back(s);
  }
  m->absorbed.push_back(mul);
  m->output = g.output(mul, 0);
  size_t add;
  if (OnlyReader(g, m->output, &add) && IsOp(g, add, "Add") && g.output(add, 0) >= 0) {
    const int bias = Other(g, add, m->output);
    if (bias >= 0 && RowConstant(g.constant(bias), n)) {
      m->inputs[6] = bias;
      m->absorbed.push_back(add);
      m->output = g.output(add, 0);
    }
  }
  m->kernel = DynamicMatMulKernel();
  return true;
}

// A float operand of the epilogue: one value or n along the last axis, of rank <= out_rank (so
// it does not change the output's shape).
bool RowOperand(const OpContext& ctx, const NodeSlot& slot, size_t i, int64_t n, size_t out_rank) {
  if (!ctx.has_input(i)) return true;
  if (!PlainInput(ctx, slot, i) || ctx.input(i).dtype() != DType::kFloat) return false;
  const Tensor& t = ctx.input(i);
  if (static_cast<size_t>(t.rank()) > out_rank) return false;
  return t.size() == 1 || (t.size() == n && t.shape().back() == n);
}

Status PrepareDynamicMatMul(OpContext& ctx, NodeSlot& slot) {
  QState* st = ctx.num_inputs() == 7 ? PrepareInt8MatMul(ctx, slot, 0, 1, 2, 3) : nullptr;
  if (!st || !ctx.has_input(4) || NumElements(st->d.out) == 0 ||
      !RowOperand(ctx, slot, 4, st->d.n, st->d.out.size()) ||
      !RowOperand(ctx, slot, 5, st->d.n, st->d.out.size()) ||
      !RowOperand(ctx, slot, 6, st->d.n, st->d.out.size())) {
    slot.declined = true;
    slot.state.reset();
    return Status::Ok();
  }
  slot.out_layouts.assign(1, Layout::kPlain);
  ctx.set_output(0, DType::kFloat, st->d.out);
  return Status::Ok();
}

void RunDynamicMatMul(OpContext& ctx, NodeSlot& slot) {
  auto* st = static_cast<QState*>(slot.state.get());
  const int64_t n = st->d.n, npad = (n + 15) / 16 * 16;
  auto col = [&](size_t i, int64_t j) {
    const Tensor& t = ctx.input(i);
    return t.data<float>()[t.size() == 1 ? 0 : j];
  };
  st->scale.assign(static_cast<size_t>(npad), 0.f);
  for (int64_t j = 0; j < n; ++j)
    st->scale[static_cast<size_t>(j)] =
        ctx.has_input(5) ? col(4, j) * col(5, j) : col(4, j);  // the graph's Mul(s1, s2)
  QOutput out;
  out.f32 = ctx.output(0).data<float>();
  out.scale = st->scale.data();
  if (ctx.has_input(6)) {
    st->bias.assign(static_cast<size_t>(npad), 0.f);
    for (int64_t j = 0; j < n; ++j) st->bias[static_cast<size_t>(j)] = col(6, j);
    out.bias = st->bias.data();
  }
  RunInt8MatMul(ctx, slot, st, 0, 1, 2, 3, out);
}

constexpr KernelDef kDynamicMatMul = {
    "", "DynamicMatMul (pattern)", 1, 1000, nullptr, 0, 0, PrepareDynamicMatMul, RunDynamicMatMul};

const KernelDef* DynamicMatMulKernel() {
  return &kDynamicMatMul;
}

constexpr Pattern kPatterns[] = {
    {"DynamicMatMul", MatchDynamicMatMul},
};

constexpr KernelDef kKernels[] = {
    {"", "DynamicQuantizeLinear", 11, 1000, nullptr, 0, 0, PrepareDynamicQuantizeLinear,
     RunDynamicQuantizeLinear},
    {"", "MatMulInteger", 10, 1000, nullptr, 0, 0, PrepareMatMulInteger, RunMatMulInteger},
    {"", "QLinearMatMul", 10, 1000, nullptr, 0, 0, PrepareQLinearMatMul, RunQLinearMatMul},
};

}  // namespace

std::span<const Pattern> QMatMulPatterns() {
  return kPatterns;
}

std::span<const KernelDef> QMatMulKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu

// QLinearConv on the own int8 GEMM (qgemm.h), for the convolutions qconv.cc's oneDNN kernel
// declines (and ConvInteger: the same GEMM, int32 out, see PrepareConvInteger) — on CPUs without
// VNNI oneDNN's u8 x s8 products saturate in 16 bits, so it only takes weights within ±64, and ONNX
// Runtime's QOperator quantizer writes full-range int8 weights.
//
// Exact: acc = sum (x - x_zp)(w - w_zp[m]) in int32 (the GEMM's AVX2 path widens to int16 pairs,
// no saturation), then the reference's requantization y = saturate(nearbyint(float(acc + B[m]) *
// (x_scale * w_scale[m] / y_scale)) + y_zp) — bit for bit QLinearConv (ops/reference/quant.cc).
//  * group 1: im2col rows of the NHWC input ([pixels, kh * kw * C], the padding holding x_zp; a
//    1x1 stride-1 unpadded conv reads the NHWC input in place) times W packed once per session
//    as [kh * kw * C, M];
//  * depthwise (group == C == M): per output pixel, the taps' channel vectors in int32 lanes;
//  * other groups decline.
// The input is read as it arrives (NHWC, or plain copied to NHWC first); the output is written
// NHWC when every reader takes it (int8 activations stay NHWC between int8 convs), else plain.
#include <immintrin.h>

#include <cmath>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"
#include "ops/cpu/packed.h"
#include "ops/cpu/qgemm.h"
#include "ops/cpu/vec.h"

namespace ferry::ops::cpu {

namespace {

struct QPackedConvB {
  QPackedB b;
  size_t bytes() const {
    return static_cast<size_t>(b.kp * b.npad) + (b.colsum.size() + b.zb.size()) * sizeof(int32_t);
  }
};

struct OwnQConvState : KernelState {
  StateKey key;
  int64_t n = 1, c = 1, h = 1, w = 1, m = 1, kh = 1, kw = 1, oh = 1, ow = 1;
  int64_t sh = 1, sw = 1, pt = 0, pl = 0, dh = 1, dw = 1;
  bool depthwise = false, direct = false;  // direct: 1x1 stride 1, no pads, NHWC input
  bool x_signed = false, y_signed = false, nhwc_in = false, nhwc_out = false;
  bool integer = false;  // ConvInteger: int32 out, plain, no requantization
  int32_t zx = 0, zy = 0;
  std::vector<float> mult;
  std::vector<int32_t> bias;
  std::shared_ptr<const QPackedConvB> packed;  // group 1
  std::vector<int32_t> dw_w;                   // depthwise: [kh * kw][C], w - w_zp
  std::vector<uint8_t> x_nhwc, col;            // scratch (this context's)
  std::vector<int32_t> acc;
};

// [N, C, HW] to [N, HW, C], in blocks of 64 pixels (each block's C * 64 outputs stay in L1).
template <typename T>
void ToNhwc(const T* x, T* y, int64_t n, int64_t c, int64_t hw) {
  constexpr int64_t kB = 64;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p0 = 0; p0 < hw; p0 += kB) {
      const int64_t p1 = std::min(hw, p0 + kB);
      for (int64_t ch = 0; ch < c; ++ch) {
        const T* src = x + (b * c + ch) * hw;
        T* dst = y + b * hw * c + ch;
        for (int64_t p = p0; p < p1; ++p) dst[p * c] = src[p];
      }
    }
}

// im2col of output rows [r0, r1) (row = (b, oy, ox)) into col [rows, kh * kw * C].
template <typename T>
void Im2Col(const OwnQConvState& s, const T* x, T* col, int64_t r0, int64_t r1) {
  const int64_t k = s.kh * s.kw * s.c;
  const T pad = static_cast<T>(s.zx);
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / (s.oh * s.ow), oy = (r / s.ow) % s.oh, ox = r % s.ow;
    T* dst = col + (r - r0) * k;
    for (int64_t i = 0; i < s.kh; ++i) {
      const int64_t iy = oy * s.sh - s.pt + i * s.dh;
      for (int64_t j = 0; j < s.kw; ++j, dst += s.c) {
        const int64_t ix = ox * s.sw - s.pl + j * s.dw;
        if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) {
          std::fill(dst, dst + s.c, pad);
        } else {
          std::memcpy(dst, x + ((b * s.h + iy) * s.w + ix) * s.c,
                      static_cast<size_t>(s.c) * sizeof(T));
        }
      }
    }
  }
}

// Depthwise taps for output rows [r0, r1) into acc [rows, C].
template <typename T>
inline __attribute__((always_inline)) void DepthwiseRows(const OwnQConvState& s, const T* x,
                                                         int32_t* acc, int64_t r0, int64_t r1) {
  const int64_t c = s.c;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / (s.oh * s.ow), oy = (r / s.ow) % s.oh, ox = r % s.ow;
    int32_t* a = acc + (r - r0) * c;
    for (int64_t ch = 0; ch < c; ++ch) a[ch] = 0;
    for (int64_t i = 0; i < s.kh; ++i) {
      const int64_t iy = oy * s.sh - s.pt + i * s.dh;
      if (iy < 0 || iy >= s.h) continue;
      for (int64_t j = 0; j < s.kw; ++j) {
        const int64_t ix = ox * s.sw - s.pl + j * s.dw;
        if (ix < 0 || ix >= s.w) continue;
        const T* xp = x + ((b * s.h + iy) * s.w + ix) * c;
        const int32_t* wp = s.dw_w.data() + (i * s.kw + j) * c;
        const int32_t zx = s.zx;
#pragma omp simd
        for (int64_t ch = 0; ch < c; ++ch) a[ch] += (static_cast<int32_t>(xp[ch]) - zx) * wp[ch];
      }
    }
  }
}

// y = saturate(nearbyint(float(acc + bias[m]) * mult[m]) + zy) for `rows` rows of M values.
template <typename Y>
void RequantRowsScalar(const int32_t* acc, int64_t rows, int64_t m, const int32_t* bias,
                       const float* mult, int32_t zy, Y* y) {
  constexpr float lo = std::is_signed_v<Y> ? -128.f : 0.f, hi = std::is_signed_v<Y> ? 127.f : 255.f;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < m; ++j) {
      const int32_t v = static_cast<int32_t>(static_cast<uint32_t>(acc[r * m + j]) +
                                             static_cast<uint32_t>(bias[j]));
      const float q = std::nearbyint(static_cast<float>(v) * mult[j]) + static_cast<float>(zy);
      y[r * m + j] = static_cast<Y>(std::clamp(q, lo, hi));
    }
}

template <typename Y>
__attribute__((target("avx2"))) void RequantRowsAvx2(const int32_t* acc, int64_t rows, int64_t m,
                                                     const int32_t* bias, const float* mult,
                                                     int32_t zy, Y* y) {
  const __m256i vz = _mm256_set1_epi32(zy);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* a = acc + r * m;
    Y* yr = y + r * m;
    int64_t j = 0;
    for (; j + 8 <= m; j += 8) {
      __m256i v = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + j)),
                                   _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias + j)));
      const __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_loadu_ps(mult + j));
      // cvtps rounds half to even (MXCSR default); the packs saturate to the type's range.
      v = _mm256_add_epi32(_mm256_cvtps_epi32(f), vz);
      const __m128i p16 =
          _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
      const __m128i p8 =
          std::is_signed_v<Y> ? _mm_packs_epi16(p16, p16) : _mm_packus_epi16(p16, p16);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(yr + j), p8);
    }
    RequantRowsScalar(a + j, 1, m - j, bias + j, mult + j, zy, yr + j);
  }
}

FERRY_TARGET_CLONES void DepthwiseRowsU8(const OwnQConvState& s, const uint8_t* x, int32_t* acc,
                                         int64_t r0, int64_t r1) {
  DepthwiseRows(s, x, acc, r0, r1);
}

FERRY_TARGET_CLONES void DepthwiseRowsS8(const OwnQConvState& s, const int8_t* x, int32_t* acc,
                                         int64_t r0, int64_t r1) {
  DepthwiseRows(s, x, acc, r0, r1);
}

bool Avx2() {
  static const bool a = __builtin_cpu_supports("avx2");
  return a;
}

Status DeclineOwn(NodeSlot& slot) {
  slot.declined = true;
  slot.state.reset();
  return Status::Ok();
}

}  // namespace

// Prepares the own kernel for a QLinearConv node (called by contrib.cc when QConv declined);
// declines (slot.declined) when it cannot take it.
Status PrepareOwnQLinearConv(OpContext& ctx, NodeSlot& slot) {
  slot.declined = false;
  FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, ctx.num_inputs()));
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(3);
  const QIsa isa = QGemmIsa();
  if (isa == QIsa::kNone || !Avx2() || x.rank() != 4 || w.dtype() != DType::kInt8 ||
      x.size() == 0 || !ConstInput(slot, 3) || !ConstInput(slot, 5) || !ConstInput(slot, 4) ||
      !ConstInput(slot, 1) || !ConstInput(slot, 6))
    return DeclineOwn(slot);
  const Layout l = slot.in_layouts.empty() ? Layout::kPlain : slot.in_layouts[0];
  if (l != Layout::kPlain && l != Layout::kNhwc) return DeclineOwn(slot);
  const KeyProbe key = MakeKey(ctx, slot);
  if (auto* st = dynamic_cast<OwnQConvState*>(slot.state.get()); st && st->key == key) {
    slot.out_layouts.assign(1, st->nhwc_out ? Layout::kNhwc : Layout::kPlain);
    ctx.set_output(0, decl[0].dtype, decl[0].shape);
    return Status::Ok();
  }
  const ir::Node& node = ctx.node();
  auto s = std::make_unique<OwnQConvState>();
  s->key = std::move(key);
  const int64_t group = node.attr_int("group", 1);
  s->n = x.dim(0);
  s->c = x.dim(1);
  s->h = x.dim(2);
  s->w = x.dim(3);
  s->m = w.dim(0);
  s->kh = w.dim(2);
  s->kw = w.dim(3);
  const Shape& out = decl[0].shape;
  s->oh = out[2];
  s->ow = out[3];
  std::vector<int64_t> st = node.attr_ints("strides"), pads = node.attr_ints("pads"),
                       dil = node.attr_ints("dilations");
  if (!st.empty()) s->sh = st[0], s->sw = st[1];
  if (!dil.empty()) s->dh = dil[0], s->dw = dil[1];
  if (node.attr_string("auto_pad", "NOTSET") != "NOTSET") return DeclineOwn(slot);
  if (!pads.empty()) s->pt = pads[0], s->pl = pads[1];
  s->depthwise = group == s->c && group == s->m && w.dim(1) == 1;
  if (group != 1 && !s->depthwise) return DeclineOwn(slot);
  s->x_signed = x.dtype() == DType::kInt8;
  s->y_signed = decl[0].dtype == DType::kInt8;
  s->zx = static_cast<int32_t>(ctx.input(2).GetAsInt64(0));
  s->zy = ctx.has_input(7) ? static_cast<int32_t>(ctx.input(7).GetAsInt64(0)) : 0;
  s->nhwc_in = l == Layout::kNhwc;
  s->nhwc_out = !slot.nhwc_ok.empty() && slot.nhwc_ok[0];
  s->direct = !s->depthwise && s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 && s->pt == 0 &&
              s->pl == 0 && s->oh == s->h && s->ow == s->w;
  const float x_scale = static_cast<float>(ctx.input(1).GetAsDouble(0));
  const float y_scale = static_cast<float>(ctx.input(6).GetAsDouble(0));
  const Tensor& ws = ctx.input(4);
  std::vector<int32_t> wz(static_cast<size_t>(s->m), 0);
  if (ctx.has_input(5))
    for (int64_t j = 0; j < s->m; ++j)
      wz[static_cast<size_t>(j)] =
          static_cast<int32_t>(ctx.input(5).GetAsInt64(ctx.input(5).size() == 1 ? 0 : j));
  s->mult.resize(static_cast<size_t>(s->m));
  s->bias.assign(static_cast<size_t>(s->m), 0);
  for (int64_t j = 0; j < s->m; ++j) {
    s->mult[static_cast<size_t>(j)] =
        x_scale * static_cast<float>(ws.GetAsDouble(ws.size() == 1 ? 0 : j)) / y_scale;
    if (ctx.has_input(8)) s->bias[static_cast<size_t>(j)] = ctx.input(8).data<int32_t>()[j];
  }
  const int8_t* wp = w.data<int8_t>();
  const int64_t taps = s->kh * s->kw;
  if (s->depthwise) {
    s->dw_w.resize(static_cast<size_t>(taps * s->c));
    for (int64_t ch = 0; ch < s->c; ++ch)
      for (int64_t t = 0; t < taps; ++t)
        s->dw_w[static_cast<size_t>(t * s->c + ch)] =
            int32_t{wp[ch * taps + t]} - wz[static_cast<size_t>(ch)];
  } else {
    const int64_t k = taps * s->c, m = s->m, c = s->c;
    const std::string tag =
        fmt::format("qlinearconv q{} k{} m{} kh{} kw{} zp{}", static_cast<int>(isa), k, m, s->kh,
                    s->kw, ctx.has_input(5) ? ctx.input(5).raw() : nullptr);
    s->packed = SharedPack<QPackedConvB>(slot, true, w.raw(), tag, [&] {
      // B[(i, j, ch), m] = W[m, ch, i, j]: the im2col rows' order.
      std::vector<int8_t> b(static_cast<size_t>(k * m));
      for (int64_t o = 0; o < m; ++o)
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t t = 0; t < taps; ++t)
            b[static_cast<size_t>((t * c + ch) * m + o)] = wp[(o * c + ch) * taps + t];
      auto p = std::make_shared<QPackedConvB>();
      QPackB(isa, b.data(), true, k, m, m, wz.data(), false, &p->b);
      return p;
    });
  }
  slot.out_layouts.assign(1, s->nhwc_out ? Layout::kNhwc : Layout::kPlain);
  slot.state = std::move(s);
  ctx.set_output(0, decl[0].dtype, decl[0].shape);
  return Status::Ok();
}

// ConvInteger (group 1, 2-D, constant W and w_zero_point; x_zero_point read every run): the
// same im2col GEMM, its int32 sums written plain.
Status PrepareConvInteger(OpContext& ctx, NodeSlot& slot) {
  slot.declined = false;
  FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, ctx.num_inputs()));
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const QIsa isa = QGemmIsa();
  const ir::Node& node = ctx.node();
  const Layout l = slot.in_layouts.empty() ? Layout::kPlain : slot.in_layouts[0];
  if (isa == QIsa::kNone || !Avx2() || x.rank() != 4 || x.size() == 0 || !ConstInput(slot, 1) ||
      (ctx.has_input(3) && !ConstInput(slot, 3)) || node.attr_int("group", 1) != 1 ||
      node.attr_string("auto_pad", "NOTSET") != "NOTSET" || l != Layout::kPlain)
    return DeclineOwn(slot);
  const KeyProbe key = MakeKey(ctx, slot);
  if (auto* st = dynamic_cast<OwnQConvState*>(slot.state.get()); st && st->key == key) {
    slot.out_layouts.assign(1, Layout::kPlain);
    ctx.set_output(0, DType::kInt32, decl[0].shape);
    return Status::Ok();
  }
  auto s = std::make_unique<OwnQConvState>();
  s->key = std::move(key);
  s->integer = true;
  s->n = x.dim(0), s->c = x.dim(1), s->h = x.dim(2), s->w = x.dim(3);
  s->m = w.dim(0), s->kh = w.dim(2), s->kw = w.dim(3);
  const Shape& out = decl[0].shape;
  s->oh = out[2], s->ow = out[3];
  std::vector<int64_t> st = node.attr_ints("strides"), pads = node.attr_ints("pads"),
                       dil = node.attr_ints("dilations");
  if (!st.empty()) s->sh = st[0], s->sw = st[1];
  if (!dil.empty()) s->dh = dil[0], s->dw = dil[1];
  if (!pads.empty()) s->pt = pads[0], s->pl = pads[1];
  s->x_signed = x.dtype() == DType::kInt8;
  s->direct = false;  // plain input: im2col reads the NHWC copy
  std::vector<int32_t> wz(static_cast<size_t>(s->m), 0);
  if (ctx.has_input(3))
    for (int64_t j = 0; j < s->m; ++j)
      wz[static_cast<size_t>(j)] =
          static_cast<int32_t>(ctx.input(3).GetAsInt64(ctx.input(3).size() == 1 ? 0 : j));
  const bool w_signed = w.dtype() == DType::kInt8;
  const auto* wp = static_cast<const uint8_t*>(w.raw());
  const int64_t taps = s->kh * s->kw, k = taps * s->c, m = s->m, c = s->c;
  const std::string tag = fmt::format("convinteger q{} s{} k{} m{} kh{} kw{} zp{}",
                                      static_cast<int>(isa), w_signed ? 1 : 0, k, m, s->kh, s->kw,
                                      ctx.has_input(3) ? ctx.input(3).raw() : nullptr);
  s->packed = SharedPack<QPackedConvB>(slot, true, w.raw(), tag, [&] {
    std::vector<uint8_t> b(static_cast<size_t>(k * m));  // B[(i, j, ch), m] = W[m, ch, i, j]
    for (int64_t o = 0; o < m; ++o)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t t = 0; t < taps; ++t)
          b[static_cast<size_t>((t * c + ch) * m + o)] = wp[(o * c + ch) * taps + t];
    auto p = std::make_shared<QPackedConvB>();
    QPackB(isa, b.data(), w_signed, k, m, m, wz.data(), false, &p->b);
    return p;
  });
  slot.out_layouts.assign(1, Layout::kPlain);
  slot.state = std::move(s);
  ctx.set_output(0, DType::kInt32, decl[0].shape);
  return Status::Ok();
}

bool IsOwnQLinearConv(const NodeSlot& slot) {
  return dynamic_cast<const OwnQConvState*>(slot.state.get()) != nullptr;
}

void RunOwnQLinearConv(OpContext& ctx, NodeSlot& slot) {
  auto& s = *static_cast<OwnQConvState*>(slot.state.get());
  const Tensor& xt = ctx.input(0);
  if (s.integer) s.zx = ctx.has_input(2) ? static_cast<int32_t>(ctx.input(2).GetAsInt64(0)) : 0;
  const uint8_t* x = static_cast<const uint8_t*>(xt.raw());
  const int64_t hw = s.h * s.w, rows = s.n * s.oh * s.ow, m = s.m;
  if (!s.nhwc_in) {
    s.x_nhwc.resize(static_cast<size_t>(xt.size()));
    ToNhwc(x, s.x_nhwc.data(), s.n, s.c, hw);
    x = s.x_nhwc.data();
  }
  s.acc.resize(static_cast<size_t>(rows * m));
  if (s.depthwise) {
    ParallelRange(rows, 64, [&](int64_t b, int64_t e) {
      if (s.x_signed)
        DepthwiseRowsS8(s, reinterpret_cast<const int8_t*>(x), s.acc.data() + b * m, b, e);
      else
        DepthwiseRowsU8(s, x, s.acc.data() + b * m, b, e);
    });
  } else {
    const int64_t k = s.kh * s.kw * s.c;
    const uint8_t* a = x;
    if (!s.direct) {
      s.col.resize(static_cast<size_t>(rows * k));
      ParallelRange(rows, 64, [&](int64_t b, int64_t e) {
        if (s.x_signed)
          Im2Col(s, reinterpret_cast<const int8_t*>(x),
                 reinterpret_cast<int8_t*>(s.col.data()) + b * k, b, e);
        else
          Im2Col(s, x, s.col.data() + b * k, b, e);
      });
      a = s.col.data();
    }
    QOutput out;
    out.i32 = s.acc.data();
    out.ldc = m;
    QGemm(s.packed->b, a, s.x_signed, rows, k, &s.zx, true, out);
  }
  Tensor& y = ctx.output(0);
  if (s.integer) {  // [rows, M] to plain [N, M, OH * OW]
    int32_t* yp = y.data<int32_t>();
    const int64_t ohw = s.oh * s.ow;
    // In blocks of 16 pixels: the block's 16 * M sums stay in L1 while each channel's 16
    // outputs are stored.
    constexpr int64_t kB = 16;
    const int64_t blocks = (ohw + kB - 1) / kB;
    ParallelRange(s.n * blocks, 8, [&](int64_t b, int64_t e) {
      for (int64_t q = b; q < e; ++q) {
        const int64_t img = q / blocks, p0 = (q % blocks) * kB, p1 = std::min(ohw, p0 + kB);
        const int32_t* a = s.acc.data() + img * ohw * m;
        int32_t* d = yp + img * m * ohw;
        for (int64_t j = 0; j < m; ++j)
          for (int64_t p = p0; p < p1; ++p) d[j * ohw + p] = a[p * m + j];
      }
    });
    return;
  }
  auto finish = [&](auto* yp) {
    using Y = std::remove_pointer_t<decltype(yp)>;
    const int64_t ohw = s.oh * s.ow;
    if (s.nhwc_out) {
      ParallelRange(rows, 256, [&](int64_t b, int64_t e) {
        RequantRowsAvx2(s.acc.data() + b * m, e - b, m, s.bias.data(), s.mult.data(), s.zy,
                        yp + b * m);
      });
      return;
    }
    // Plain output: requantize a row block into a small NHWC buffer, then scatter per channel.
    ParallelRange(rows, 256, [&](int64_t b, int64_t e) {
      std::vector<Y> tmp(static_cast<size_t>(64 * m));
      for (int64_t r0 = b; r0 < e; r0 += 64) {
        const int64_t r1 = std::min(e, r0 + 64);
        RequantRowsAvx2(s.acc.data() + r0 * m, r1 - r0, m, s.bias.data(), s.mult.data(), s.zy,
                        tmp.data());
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t img = r / ohw, p = r % ohw;
          for (int64_t j = 0; j < m; ++j)
            yp[(img * m + j) * ohw + p] = tmp[static_cast<size_t>((r - r0) * m + j)];
        }
      }
    });
  };
  if (s.y_signed)
    finish(y.data<int8_t>());
  else
    finish(y.data<uint8_t>());
}

namespace {
constexpr KernelDef kConvInteger[] = {
    {"", "ConvInteger", 10, 1000, nullptr, 0, 0, PrepareConvInteger, RunOwnQLinearConv},
};
}  // namespace

std::span<const KernelDef> ConvIntegerKernels() {
  return kConvInteger;
}

}  // namespace ferry::ops::cpu

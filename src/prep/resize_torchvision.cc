// torchvision 0.14's tensor resize (torchvision.transforms.functional.resize on a uint8 CHW
// tensor) as Debian's torch 1.13 computes it on the CPU: the tensor cast to float32,
// torch.nn.functional.interpolate(mode="bilinear", align_corners=False, antialias=...), then
// torch.round (half to even) and the cast back to uint8. The arithmetic below was measured
// against that build (tests/prep/test_prep.py); the float rounding steps are spelled out because
// they decide which outputs land on the other side of .5.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "prep/resize.h"

namespace ferry::prep {

namespace {

uint8_t RoundToU8(float v) {
  float r = std::nearbyint(v);  // torch.round: half to even (the default rounding mode)
  return static_cast<uint8_t>(std::clamp(r, 0.0f, 255.0f));
}

// upsample_bilinear2d's taps for one axis (compute_source_index_and_lambda): the ratio in
// float, the source index in double, lambda1 rounded to float, lambda0 = 1 - lambda1 in float.
struct LinearTaps {
  std::vector<int64_t> i0, i1;
  std::vector<float> l0, l1;
};

LinearTaps LinearAxis(int64_t in, int64_t out) {
  LinearTaps t;
  t.i0.resize(out), t.i1.resize(out), t.l0.resize(out), t.l1.resize(out);
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int64_t d = 0; d < out; ++d) {
    if (in == out) {
      t.i0[d] = t.i1[d] = d, t.l0[d] = 1.0f, t.l1[d] = 0.0f;
      continue;
    }
    double real = std::max(static_cast<double>(scale) * (static_cast<double>(d) + 0.5) - 0.5, 0.0);
    int64_t i0 = static_cast<int64_t>(real);
    t.i0[d] = i0;
    t.i1[d] = i0 + (i0 < in - 1 ? 1 : 0);
    t.l1[d] = static_cast<float>(std::min(std::max(real - static_cast<double>(i0), 0.0), 1.0));
    t.l0[d] = 1.0f - t.l1[d];
  }
  return t;
}

// Without antialias, two kernels as torch 1.13 picks them (measured equal, element for element,
// on random float images): a 1-channel tensor (which torch also sees as channels-last) takes the
// four source pixels times the float products of the axis weights, summed in double and rounded
// once to float; a 3-channel one (cpu_upsample_generic, built with FMA contraction) takes
// t_r = fma(x_r0, wx0, x_r1 * wx1) per source row, then fma(t_0, wy0, t_1 * wy1), in float.
// Both kernels are cloned for CPUs with FMA (ifunc-dispatched): there std::fma is one
// instruction, elsewhere a libm call; the results are the same.
__attribute__((target_clones("fma", "default"))) std::vector<float> Bilinear(const Image& in,
                                                                             int64_t oh, int64_t ow,
                                                                             const float* v) {
  const LinearTaps ty = LinearAxis(in.height, oh), tx = LinearAxis(in.width, ow);
  const int64_t c = in.channels;
  std::vector<float> out(static_cast<size_t>(oh * ow * c));
  for (int64_t y = 0; y < oh; ++y) {
    const uint8_t* r0 = in.row(ty.i0[y]);
    const uint8_t* r1 = in.row(ty.i1[y]);
    float* d = out.data() + y * ow * c;
    for (int64_t x = 0; x < ow; ++x) {
      const float w00 = ty.l0[y] * tx.l0[x], w01 = ty.l0[y] * tx.l1[x];
      const float w10 = ty.l1[y] * tx.l0[x], w11 = ty.l1[y] * tx.l1[x];
      const int64_t a = tx.i0[x] * c, b = tx.i1[x] * c;
      if (c == 1) {
        double s = static_cast<double>(v[r0[a]]) * w00 + static_cast<double>(v[r0[b]]) * w01 +
                   static_cast<double>(v[r1[a]]) * w10 + static_cast<double>(v[r1[b]]) * w11;
        d[x] = static_cast<float>(s);
        continue;
      }
      const float wx0 = tx.l0[x], wx1 = tx.l1[x], wy0 = ty.l0[y], wy1 = ty.l1[y];
      for (int64_t k = 0; k < c; ++k) {
        const float t0 = std::fma(v[r0[a + k]], wx0, v[r0[b + k]] * wx1);
        const float t1 = std::fma(v[r1[a + k]], wx0, v[r1[b + k]] * wx1);
        d[x * c + k] = std::fma(t0, wy0, t1 * wy1);
      }
    }
  }
  return out;
}

// _upsample_bilinear2d_aa's taps for one axis (HelperInterpLinear::_compute_weights_aa): the
// triangle stretched by the reduction factor, every step in float with C++'s promotions to
// double where torch's source mixes in double literals; weights normalised by their float sum.
struct AaTaps {
  std::vector<int64_t> start, size;
  std::vector<std::vector<float>> w;
  // The first tap index whose accumulation is fused (fma); see Accumulate.
  size_t fused_from = 1;
};

AaTaps AaAxis(int64_t in, int64_t out) {
  AaTaps t;
  t.start.resize(out), t.size.resize(out), t.w.resize(out);
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  const float support = scale >= 1.0f ? static_cast<float>(1.0 * scale) : 1.0f;
  const float invscale = scale >= 1.0f ? static_cast<float>(1.0 / scale) : 1.0f;
  for (int64_t i = 0; i < out; ++i) {
    const float center = static_cast<float>(static_cast<double>(scale) * (i + 0.5));
    const int64_t xmin =
        std::max<int64_t>(static_cast<int64_t>(static_cast<double>(center - support) + 0.5), 0);
    const int64_t xsize =
        std::min<int64_t>(static_cast<int64_t>(static_cast<double>(center + support) + 0.5), in) -
        xmin;
    std::vector<float> w(static_cast<size_t>(std::max<int64_t>(xsize, 0)));
    float total = 0.0f;
    for (int64_t j = 0; j < xsize; ++j) {
      const float v =
          static_cast<float>((static_cast<double>(static_cast<float>(j + xmin) - center) + 0.5) *
                             static_cast<double>(invscale));
      const float a = std::fabs(v);
      const float f = a < 1.0f ? 1.0f - a : 0.0f;
      w[j] = f;
      total += f;
    }
    if (total != 0.0f)
      for (float& v : w) v /= total;
    t.start[i] = xmin, t.size[i] = xsize, t.w[i] = std::move(w);
  }
  size_t max_taps = 0;
  for (const auto& w : t.w) max_taps = std::max(max_taps, w.size());
  t.fused_from = max_taps <= 5 ? 1 : 5;
  return t;
}

// One output of a pass: acc = x0 w0, then acc += xj wj in tap order, in float; torch 1.13's
// compiled loop fuses some of these into fma. Measured on random rows: all fused when at most
// 5 taps (every enlargement and reductions up to ~2.3x: equal on every element), else the
// first four additions plain and the rest fused (equal at 3.7x; 99-99.9% of elements at other
// factors, the rest one float ulp off, which moves a rounded uint8 only at an exact .5).
inline float Accumulate(const float* x, size_t stride, const std::vector<float>& w,
                        size_t fused_from) {
  if (w.empty()) return 0.0f;
  float acc = x[0] * w[0];
  for (size_t j = 1; j < w.size(); ++j)
    acc = j >= fused_from ? std::fma(x[j * stride], w[j], acc) : acc + x[j * stride] * w[j];
  return acc;
}

// With antialias: separable, the width first into a float32 image, then the height (torch's
// separable_upsample_generic_Nd: the last dim first), each pass through Accumulate.
__attribute__((target_clones("fma", "default"))) std::vector<float> BilinearAa(const Image& in,
                                                                               int64_t oh,
                                                                               int64_t ow,
                                                                               const float* v) {
  const int64_t h = in.height, w = in.width, c = in.channels;
  const AaTaps tx = AaAxis(w, ow), ty = AaAxis(h, oh);
  std::vector<float> src(in.pixels.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = v[in.pixels[i]];
  std::vector<float> mid(static_cast<size_t>(h * ow * c));
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < ow; ++x)
      for (int64_t k = 0; k < c; ++k)
        mid[(y * ow + x) * c + k] =
            Accumulate(src.data() + (y * w + tx.start[x]) * c + k, c, tx.w[x], tx.fused_from);
  const int64_t stride = ow * c;
  std::vector<float> out(static_cast<size_t>(oh * stride));
  for (int64_t y = 0; y < oh; ++y) {
    const float* s = mid.data() + ty.start[y] * stride;
    float* d = out.data() + y * stride;
    for (int64_t i = 0; i < stride; ++i) d[i] = Accumulate(s + i, stride, ty.w[y], ty.fused_from);
  }
  return out;
}

}  // namespace

std::vector<float> TorchvisionResizeFloat(const Image& in, int64_t out_height, int64_t out_width,
                                          bool antialias, const std::array<float, 256>& value) {
  return antialias ? BilinearAa(in, out_height, out_width, value.data())
                   : Bilinear(in, out_height, out_width, value.data());
}

Image TorchvisionResize(const Image& in, int64_t out_height, int64_t out_width, bool antialias) {
  std::array<float, 256> identity;
  for (int i = 0; i < 256; ++i) identity[i] = static_cast<float>(i);
  const std::vector<float> v =
      TorchvisionResizeFloat(in, out_height, out_width, antialias, identity);
  Image out(out_height, out_width, in.channels);
  for (size_t i = 0; i < v.size(); ++i) out.pixels[i] = RoundToU8(v[i]);
  return out;
}

}  // namespace ferry::prep

// The resize filters. Written from the libraries' documented behaviour and public sources
// (Pillow's libImaging/Resample.c and Geometry.c, OpenCV's imgproc/src/resize.cpp); the
// arithmetic each step reproduces is stated beside it.
#include "prep/resize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

namespace ferry::prep {

namespace {

uint8_t Clamp8(int64_t v) {
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

// ---------------------------------------------------------------- Pillow

// Pillow's filters (support in source pixels at scale 1) and its 8-bit fixed-point precision:
// coefficients are rounded to 32 - 8 - 2 = 22 fraction bits, sums start at half an LSB and are
// shifted back (an arithmetic shift: floor), then clamped to 0..255.
constexpr int kPilPrecisionBits = 32 - 8 - 2;

struct PilKernel {
  double (*fn)(double);
  double support;
};

double PilBox(double x) {
  return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0;
}
double PilBilinear(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}
double PilBicubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}
double Sinc(double x) {
  if (x == 0.0) return 1.0;
  x = x * M_PI;
  return std::sin(x) / x;
}
double PilLanczos(double x) {
  return (-3.0 <= x && x < 3.0) ? Sinc(x) * Sinc(x / 3) : 0.0;
}

// Per output position: the first source index, the count, and `ksize` integer weights.
struct PilCoeffs {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> k;
};

// The filter is stretched by the reduction factor (support * max(1, in/out)); weights are
// sampled at source pixel centres, normalised to sum 1 in double, then rounded away from zero
// to 22-bit integers.
PilCoeffs PilPrecompute(int in_size, int out_size, const PilKernel& kernel) {
  const float in0 = 0.0f, in1 = static_cast<float>(in_size);
  const double scale = static_cast<double>(in1 - in0) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = kernel.support * filterscale;
  PilCoeffs c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(out_size);
  c.count.resize(out_size);
  c.k.assign(static_cast<size_t>(out_size) * c.ksize, 0);
  std::vector<double> w(c.ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      w[x] = kernel.fn((x + xmin - center + 0.5) * ss);
      ww += w[x];
    }
    int32_t* k = &c.k[static_cast<size_t>(xx) * c.ksize];
    for (int x = 0; x < xmax; ++x) {
      double v = ww != 0.0 ? w[x] / ww : w[x];
      k[x] = v < 0 ? static_cast<int32_t>(-0.5 + v * (1 << kPilPrecisionBits))
                   : static_cast<int32_t>(0.5 + v * (1 << kPilPrecisionBits));
    }
    c.first[xx] = xmin;
    c.count[xx] = xmax;
  }
  return c;
}

uint8_t PilClip(int64_t ss) {
  return Clamp8(ss >> kPilPrecisionBits);
}

// One horizontal pass: every row of `in`, each output column a weighted sum rounded to 8 bits.
Image PilHorizontal(const Image& in, const PilCoeffs& hor, int out_w) {
  const int c = static_cast<int>(in.channels);
  Image out(in.height, out_w, c);
  for (int64_t y = 0; y < in.height; ++y) {
    const uint8_t* s = in.row(y);
    uint8_t* d = out.row(y);
    for (int xx = 0; xx < out_w; ++xx) {
      const int32_t* k = &hor.k[static_cast<size_t>(xx) * hor.ksize];
      const uint8_t* p = s + static_cast<size_t>(hor.first[xx]) * c;
      for (int ch = 0; ch < c; ++ch) {
        int64_t ss = 1 << (kPilPrecisionBits - 1);
        for (int x = 0; x < hor.count[xx]; ++x) ss += int64_t{p[x * c + ch]} * k[x];
        d[xx * c + ch] = PilClip(ss);
      }
    }
  }
  return out;
}

// One vertical pass: each output row a weighted sum of source rows, rounded to 8 bits.
Image PilVertical(const Image& in, const PilCoeffs& vert, int out_h) {
  Image out(out_h, in.width, in.channels);
  const int64_t row_len = in.width * in.channels;
  for (int yy = 0; yy < out_h; ++yy) {
    const int32_t* k = &vert.k[static_cast<size_t>(yy) * vert.ksize];
    uint8_t* d = out.row(yy);
    for (int64_t i = 0; i < row_len; ++i) {
      int64_t ss = 1 << (kPilPrecisionBits - 1);
      for (int y = 0; y < vert.count[yy]; ++y) ss += int64_t{in.row(vert.first[yy] + y)[i]} * k[y];
      d[i] = PilClip(ss);
    }
  }
  return out;
}

// Two passes, each rounded to 8 bits, a pass skipped when its size is unchanged. The order is
// Pillow 13's, measured (older Pillow always went horizontal first): vertical first when the
// height shrinks and 2 * (out_w - in_w) > out_h - in_h, else horizontal first. Which rows or
// columns the first pass covers does not change any value, so both passes cover all.
Image PilResample(const Image& in, int out_h, int out_w, const PilKernel& kernel) {
  const bool need_h = out_w != in.width;
  const bool need_v = out_h != in.height;
  PilCoeffs hor = PilPrecompute(static_cast<int>(in.width), out_w, kernel);
  PilCoeffs vert = PilPrecompute(static_cast<int>(in.height), out_h, kernel);
  if (need_h && need_v) {
    const bool vertical_first = out_h < in.height && 2 * (out_w - in.width) > out_h - in.height;
    if (vertical_first) return PilHorizontal(PilVertical(in, vert, out_h), hor, out_w);
    return PilVertical(PilHorizontal(in, hor, out_w), vert, out_h);
  }
  if (need_h) return PilHorizontal(in, hor, out_w);
  if (need_v) return PilVertical(in, vert, out_h);
  return in;
}

// Pillow's NEAREST: an affine scale sampled at output pixel centres, the source coordinate
// accumulated step by step in double (a[2] + a[0] / 2, then += a[0]) and truncated.
std::vector<int> PilNearestIndex(int in_size, int out_size) {
  const double step = static_cast<double>(static_cast<float>(in_size) - 0.0f) / out_size;
  std::vector<int> idx(out_size);
  double pos = 0.0 + step * 0.5;
  for (int i = 0; i < out_size; ++i) {
    int v = pos < 0.0 ? -1 : static_cast<int>(pos);
    idx[i] = std::clamp(v, 0, in_size - 1);
    pos += step;
  }
  return idx;
}

// ---------------------------------------------------------------- OpenCV

// cv::resize's 8-bit interpolation coefficients: 11 fraction bits (INTER_RESIZE_COEF_BITS),
// each rounded with cvRound (to nearest, ties to even) from its float value.
constexpr int kCvCoefBits = 11;
constexpr int kCvCoefScale = 1 << kCvCoefBits;

int CvRound(double v) {
  return static_cast<int>(std::nearbyint(v));
}
int16_t CvCoef(float v) {
  int i = static_cast<int>(std::nearbyintf(v * kCvCoefScale));
  return static_cast<int16_t>(std::clamp(i, -32768, 32767));
}
uint8_t CvSat(float v) {
  return Clamp8(static_cast<int64_t>(std::nearbyintf(v)));
}

void CvCubicCoeffs(float x, float* c) {
  constexpr float A = -0.75f;
  c[0] = ((A * (x + 1) - 5 * A) * (x + 1) + 8 * A) * (x + 1) - 4 * A;
  c[1] = ((A + 2) * x - (A + 3)) * x * x + 1;
  c[2] = ((A + 2) * (1 - x) - (A + 3)) * (1 - x) * (1 - x) + 1;
  c[3] = 1.f - c[0] - c[1] - c[2];
}

// Lanczos with a = 4 (interpolateLanczos4) at the 8 taps t_i = x + 3 - i, i = 0..7:
// sin(pi t) sin(pi t / 4) up to a constant factor, taken from one sin / cos pair of the
// first tap's angle y0 = -(x + 3) pi / 4 and a fixed table of 45-degree turns per tap, over
// y^2 with y = -t pi / 4; in double, each cast to float. A tap with |t| < 1e-6 gets 1e30 (the
// others ~0 after normalising). The eight are then scaled by the float reciprocal of their float
// sum. `x + 3` and `t` are float sums, as OpenCV writes them.
void CvLanczos4Coeffs(float x, float* c) {
  constexpr double kS45 = 0.70710678118654752440084436210485;
  constexpr double kTurn[8][2] = {{1, 0},  {-kS45, -kS45}, {0, 1},  {kS45, -kS45},
                                  {-1, 0}, {kS45, kS45},   {0, -1}, {-kS45, kS45}};
  const double y0 = -(x + 3) * M_PI * 0.25;
  const double s0 = std::sin(y0), c0 = std::cos(y0);
  float sum = 0;
  for (int i = 0; i < 8; ++i) {
    const float t = x + 3 - static_cast<float>(i);
    if (std::fabs(t) >= 1e-6f) {
      const double y = -t * M_PI * 0.25;
      c[i] = static_cast<float>((kTurn[i][0] * s0 + kTurn[i][1] * c0) / (y * y));
    } else {
      c[i] = 1e30f;
    }
    sum += c[i];
  }
  sum = 1.f / sum;
  for (int i = 0; i < 8; ++i) c[i] *= sum;
}

// The generic path's kernels: taps per output position.
enum class CvKernel { kLinear = 2, kCubic = 4, kLanczos4 = 8 };

// Source index and weights per output position of the generic (linear, cubic, Lanczos4,
// upscaling area) path, both as floats and as 11-bit fixed point. Linear and area clamp an
// out-of-range index to the edge with weight 1; cubic and Lanczos4 keep their taps (the first
// at floor(f) - (ksize / 2 - 1)) and replicate the edge pixel per tap.
struct CvTaps {
  int ksize = 0;
  std::vector<int> start;  // source index of tap 0 (cubic, Lanczos4: may be off the image)
  std::vector<int16_t> w;  // fixed point (linear, area, Lanczos4)
  std::vector<float> wf;   // float (cubic)
};

CvTaps CvGenericTaps(int in_size, int out_size, double scale, double inv_scale, CvKernel kernel,
                     bool area, bool clamp_linear) {
  CvTaps t;
  t.ksize = static_cast<int>(kernel);
  t.start.resize(out_size);
  t.w.resize(static_cast<size_t>(out_size) * t.ksize);
  t.wf.resize(static_cast<size_t>(out_size) * t.ksize);
  for (int d = 0; d < out_size; ++d) {
    float f;
    int s;
    if (!area) {
      f = static_cast<float>((d + 0.5) * scale - 0.5);
      s = static_cast<int>(std::floor(f));
      f -= s;
    } else {
      s = static_cast<int>(std::floor(d * scale));
      f = static_cast<float>((d + 1) - (s + 1) * inv_scale);
      f = f <= 0 ? 0.f : f - static_cast<float>(std::floor(f));
    }
    if (clamp_linear && kernel == CvKernel::kLinear) {
      if (s < 0) f = 0, s = 0;
      if (s >= in_size - 1) f = 0, s = in_size - 1;
    }
    float cb[8];
    switch (kernel) {
      case CvKernel::kLinear:
        cb[0] = 1.f - f;
        cb[1] = f;
        break;
      case CvKernel::kCubic:
        CvCubicCoeffs(f, cb);
        break;
      case CvKernel::kLanczos4:
        CvLanczos4Coeffs(f, cb);
        break;
    }
    t.start[d] = s - (t.ksize / 2 - 1);
    for (int k = 0; k < t.ksize; ++k) {
      t.w[static_cast<size_t>(d) * t.ksize + k] = CvCoef(cb[k]);
      t.wf[static_cast<size_t>(d) * t.ksize + k] = cb[k];
    }
  }
  return t;
}

// Linear (and upscaling area) on 8 bits: fixed point. The horizontal pass gives ints with
// weights summing to 2^11; the vertical pass is VResizeLinear's: both products pre-shifted by
// 4 and taken >> 16 (its SIMD multiply-high), then (sum + 2) >> 2.
Image CvLinear(const Image& in, int out_h, int out_w, bool area) {
  const int c = static_cast<int>(in.channels);
  const int in_w = static_cast<int>(in.width), in_h = static_cast<int>(in.height);
  const double inv_sx = static_cast<double>(out_w) / in_w,
               inv_sy = static_cast<double>(out_h) / in_h;
  CvTaps hx = CvGenericTaps(in_w, out_w, 1. / inv_sx, inv_sx, CvKernel::kLinear, area, true);
  CvTaps vy = CvGenericTaps(in_h, out_h, 1. / inv_sy, inv_sy, CvKernel::kLinear, area, false);
  const int64_t row_len = int64_t{out_w} * c;
  std::vector<std::vector<int32_t>> rows(in_h);
  auto hrow = [&](int y) -> const int32_t* {
    auto& r = rows[y];
    if (r.empty()) {
      r.resize(row_len);
      const uint8_t* s = in.row(y);
      for (int dx = 0; dx < out_w; ++dx) {
        const int16_t* w = &hx.w[static_cast<size_t>(dx) * 2];
        const int x0 = hx.start[dx], x1 = std::min(x0 + 1, in_w - 1);
        for (int ch = 0; ch < c; ++ch)
          r[dx * c + ch] = s[x0 * c + ch] * w[0] + s[x1 * c + ch] * w[1];
      }
    }
    return r.data();
  };
  Image out(out_h, out_w, c);
  for (int dy = 0; dy < out_h; ++dy) {
    const int16_t* b = &vy.w[static_cast<size_t>(dy) * 2];
    const int32_t* r0 = hrow(std::clamp(vy.start[dy], 0, in_h - 1));
    const int32_t* r1 = hrow(std::clamp(vy.start[dy] + 1, 0, in_h - 1));
    uint8_t* d = out.row(dy);
    for (int64_t i = 0; i < row_len; ++i)
      d[i] = Clamp8((((b[0] * (r0[i] >> 4)) >> 16) + ((b[1] * (r1[i] >> 4)) >> 16) + 2) >> 2);
  }
  return out;
}

// Cubic and Lanczos4 on 8 bits: separable, each source row's horizontal pass computed once
// (taps past an edge replicate it), then per output row the vertical pass over K rows (edge
// rows replicated). Two arithmetics:
// - cubic (K = 4), as OpenCV 5.1 computes it through its IPP HAL: float coefficients, float
//   passes, each sum taken left to right, rounded to nearest even and saturated. (OpenCV 4's
//   11-bit fixed point differs in ~3% of pixels by one.)
// - Lanczos4 (K = 8, kFixed): OpenCV's own fixed point (HResizeLanczos4<uchar, int, short>;
//   the IPP HAL does not take it: measured equal with IPP on and off): each float weight
//   rounded to 11 bits (their sum need not be 2048), exact int sums, then (sum + 2^21) >> 22,
//   saturated. The largest |sum| is 255 * (P^2 + N^2) <= 2,107,377,120 < 2^31 (P, N: one
//   position's positive and negative 11-bit weight sums, the most over 2,001 positions), so
//   OpenCV's int does not overflow; int64 here anyway.
template <int K, bool kFixed>
Image CvSeparable(const Image& in, int out_h, int out_w, CvKernel kernel) {
  static_assert(K == 4 || K == 8);
  using Acc = std::conditional_t<kFixed, int32_t, float>;
  const int c = static_cast<int>(in.channels);
  const int in_w = static_cast<int>(in.width), in_h = static_cast<int>(in.height);
  const double inv_sx = static_cast<double>(out_w) / in_w,
               inv_sy = static_cast<double>(out_h) / in_h;
  CvTaps hx = CvGenericTaps(in_w, out_w, 1. / inv_sx, inv_sx, kernel, false, true);
  CvTaps vy = CvGenericTaps(in_h, out_h, 1. / inv_sy, inv_sy, kernel, false, false);
  const int64_t row_len = int64_t{out_w} * c;
  std::vector<std::vector<Acc>> rows(in_h);
  auto hrow = [&](int y) -> const Acc* {
    auto& r = rows[y];
    if (r.empty()) {
      r.resize(row_len);
      const uint8_t* s = in.row(y);
      for (int dx = 0; dx < out_w; ++dx) {
        const size_t wi = static_cast<size_t>(dx) * K;
        int x[K];
        for (int k = 0; k < K; ++k) x[k] = std::clamp(hx.start[dx] + k, 0, in_w - 1) * c;
        for (int ch = 0; ch < c; ++ch) {
          Acc v;
          if constexpr (kFixed) {
            v = 0;
            for (int k = 0; k < K; ++k) v += s[x[k] + ch] * hx.w[wi + k];
          } else {
            v = static_cast<float>(s[x[0] + ch]) * hx.wf[wi];
            for (int k = 1; k < K; ++k) v = v + static_cast<float>(s[x[k] + ch]) * hx.wf[wi + k];
          }
          r[dx * c + ch] = v;
        }
      }
    }
    return r.data();
  };
  Image out(out_h, out_w, c);
  for (int dy = 0; dy < out_h; ++dy) {
    const size_t wi = static_cast<size_t>(dy) * K;
    const Acc* r[K];
    for (int k = 0; k < K; ++k) r[k] = hrow(std::clamp(vy.start[dy] + k, 0, in_h - 1));
    uint8_t* d = out.row(dy);
    for (int64_t i = 0; i < row_len; ++i) {
      if constexpr (kFixed) {
        int64_t v = 0;
        for (int k = 0; k < K; ++k) v += int64_t{r[k][i]} * vy.w[wi + k];
        d[i] = Clamp8((v + (int64_t{1} << (2 * kCvCoefBits - 1))) >> (2 * kCvCoefBits));
      } else {
        float v = r[0][i] * vy.wf[wi];
        for (int k = 1; k < K; ++k) v = v + r[k][i] * vy.wf[wi + k];
        d[i] = CvSat(v);
      }
    }
  }
  return out;
}

// INTER_AREA at integer factors (cv::resize's "fast area"): the mean of each kx x ky block,
// (sum + 2) >> 2 for 2x2 (its SIMD path), else sum * (1.f / area) rounded to nearest even.
Image CvAreaFast(const Image& in, int out_h, int out_w, int kx, int ky) {
  const int c = static_cast<int>(in.channels);
  Image out(out_h, out_w, c);
  const float scale = 1.f / (kx * ky);
  for (int dy = 0; dy < out_h; ++dy) {
    uint8_t* d = out.row(dy);
    for (int dx = 0; dx < out_w; ++dx)
      for (int ch = 0; ch < c; ++ch) {
        int sum = 0;
        for (int y = 0; y < ky; ++y) {
          const uint8_t* s = in.row(dy * ky + y);
          for (int x = 0; x < kx; ++x) sum += s[(dx * kx + x) * c + ch];
        }
        d[dx * c + ch] = (kx == 2 && ky == 2) ? static_cast<uint8_t>((sum + 2) >> 2)
                                              : CvSat(static_cast<float>(sum) * scale);
      }
  }
  return out;
}

struct AreaTap {
  int di, si;
  float alpha;
};

// computeResizeAreaTab: each output cell [d*scale, (d+1)*scale) split into the source pixels
// it covers, partial ones weighted by their covered share (shares under 1e-3 dropped).
std::vector<AreaTap> CvAreaTab(int in_size, int out_size, double scale) {
  std::vector<AreaTap> tab;
  for (int dx = 0; dx < out_size; ++dx) {
    double fsx1 = dx * scale;
    double fsx2 = fsx1 + scale;
    double cell = std::min(scale, in_size - fsx1);
    int sx1 = static_cast<int>(std::ceil(fsx1)), sx2 = static_cast<int>(std::floor(fsx2));
    sx2 = std::min(sx2, in_size - 1);
    sx1 = std::min(sx1, sx2);
    if (sx1 - fsx1 > 1e-3) tab.push_back({dx, sx1 - 1, static_cast<float>((sx1 - fsx1) / cell)});
    for (int sx = sx1; sx < sx2; ++sx) tab.push_back({dx, sx, static_cast<float>(1.0 / cell)});
    if (fsx2 - sx2 > 1e-3)
      tab.push_back({dx, sx2, static_cast<float>(std::min(std::min(fsx2 - sx2, 1.), cell) / cell)});
  }
  return tab;
}

// One source row's horizontal area pass: buf[di][ch] accumulated over the x taps in table
// order (float, as OpenCV). C is the channel count (1 or 3, fixed at compile time so the
// channel loop unrolls; the per-element order of the additions is unchanged).
// The taps of output cell d are xtab[cell[d] .. cell[d + 1]) (the table is built cell by cell),
// summed in registers from 0 in table order: the same additions as OpenCV's buffer.
template <int C>
void CvAreaRow(const uint8_t* s, const std::vector<AreaTap>& xtab, const std::vector<int>& cell,
               float* buf) {
  const int cells = static_cast<int>(cell.size()) - 1;
  for (int d = 0; d < cells; ++d) {
    float acc[C] = {};
    for (int t = cell[d]; t < cell[d + 1]; ++t) {
      const AreaTap& xt = xtab[t];
      const uint8_t* p = s + static_cast<size_t>(xt.si) * C;
      for (int ch = 0; ch < C; ++ch) acc[ch] = acc[ch] + p[ch] * xt.alpha;
    }
    for (int ch = 0; ch < C; ++ch) buf[static_cast<size_t>(d) * C + ch] = acc[ch];
  }
}

// Two source rows in one pass (the same additions per element as CvAreaRow, twice the
// independent chains for the CPU to overlap).
template <int C>
void CvAreaRow2(const uint8_t* s0, const uint8_t* s1, const std::vector<AreaTap>& xtab,
                const std::vector<int>& cell, float* buf0, float* buf1) {
  const int cells = static_cast<int>(cell.size()) - 1;
  for (int d = 0; d < cells; ++d) {
    float a0[C] = {}, a1[C] = {};
    for (int t = cell[d]; t < cell[d + 1]; ++t) {
      const AreaTap& xt = xtab[t];
      const size_t off = static_cast<size_t>(xt.si) * C;
      for (int ch = 0; ch < C; ++ch) {
        a0[ch] = a0[ch] + s0[off + ch] * xt.alpha;
        a1[ch] = a1[ch] + s1[off + ch] * xt.alpha;
      }
    }
    for (int ch = 0; ch < C; ++ch) {
      buf0[static_cast<size_t>(d) * C + ch] = a0[ch];
      buf1[static_cast<size_t>(d) * C + ch] = a1[ch];
    }
  }
}

// INTER_AREA at non-integer reductions: float accumulation, row by row in table order, the
// sum rounded to nearest even. A source row that two output rows share is summed horizontally
// once (as OpenCV's resizeArea_ keeps its last row).
Image CvArea(const Image& in, int out_h, int out_w) {
  const int c = static_cast<int>(in.channels);
  const double scale_x = 1. / (static_cast<double>(out_w) / in.width);
  const double scale_y = 1. / (static_cast<double>(out_h) / in.height);
  std::vector<AreaTap> xtab = CvAreaTab(static_cast<int>(in.width), out_w, scale_x);
  std::vector<AreaTap> ytab = CvAreaTab(static_cast<int>(in.height), out_h, scale_y);
  const size_t w = static_cast<size_t>(out_w) * c;
  std::vector<float> buf(w), next_buf(w), sum(w, 0.f);
  Image out(out_h, out_w, c);
  int prev = ytab.empty() ? 0 : ytab[0].di;
  int buf_row = -1, next_row = -1;  // the source rows buf and next_buf hold
  // Where each output column's taps start in xtab (cells with no tap sum to 0).
  std::vector<int> cell(static_cast<size_t>(out_w) + 1, 0);
  for (const AreaTap& xt : xtab) ++cell[static_cast<size_t>(xt.di) + 1];
  for (int d = 0; d < out_w; ++d) cell[d + 1] += cell[d];
  for (size_t k = 0; k < ytab.size(); ++k) {
    const AreaTap& yt = ytab[k];
    const float beta = yt.alpha;
    if (yt.si == next_row) {
      std::swap(buf, next_buf);
      buf_row = next_row;
      next_row = -1;
    }
    if (yt.si != buf_row && (c == 1 || c == 3)) {
      // This row and the next other row the table reaches, summed in one pass.
      int r2 = -1;
      for (size_t j = k + 1; j < ytab.size() && r2 < 0; ++j)
        if (ytab[j].si != yt.si) r2 = ytab[j].si;
      if (r2 >= 0) {
        if (c == 3)
          CvAreaRow2<3>(in.row(yt.si), in.row(r2), xtab, cell, buf.data(), next_buf.data());
        else
          CvAreaRow2<1>(in.row(yt.si), in.row(r2), xtab, cell, buf.data(), next_buf.data());
        buf_row = yt.si;
        next_row = r2;
      }
    }
    if (yt.si != buf_row) {
      const uint8_t* s = in.row(yt.si);
      if (c == 3) {
        CvAreaRow<3>(s, xtab, cell, buf.data());
      } else if (c == 1) {
        CvAreaRow<1>(s, xtab, cell, buf.data());
      } else {
        std::fill(buf.begin(), buf.end(), 0.f);
        for (const AreaTap& xt : xtab)
          for (int ch = 0; ch < c; ++ch)
            buf[xt.di * c + ch] = buf[xt.di * c + ch] + s[xt.si * c + ch] * xt.alpha;
      }
      buf_row = yt.si;
    }
    if (yt.di != prev) {
      uint8_t* d = out.row(prev);
      for (size_t i = 0; i < w; ++i) {
        d[i] = CvSat(sum[i]);
        sum[i] = beta * buf[i];
      }
      prev = yt.di;
    } else {
      for (size_t i = 0; i < w; ++i) sum[i] = sum[i] + beta * buf[i];
    }
  }
  uint8_t* d = out.row(prev);
  for (size_t i = 0; i < w; ++i) d[i] = CvSat(sum[i]);
  return out;
}

Image CvResize(const Image& in, int out_h, int out_w, Filter f) {
  const int in_w = static_cast<int>(in.width), in_h = static_cast<int>(in.height);
  const double inv_sx = static_cast<double>(out_w) / in_w,
               inv_sy = static_cast<double>(out_h) / in_h;
  const double sx = 1. / inv_sx, sy = 1. / inv_sy;
  if (f == Filter::kCv2Nearest || f == Filter::kCv2NearestExact) {
    std::vector<int> xi(out_w), yi(out_h);
    if (f == Filter::kCv2Nearest) {
      // resizeNN: floor(d / (out / in)), clamped.
      for (int x = 0; x < out_w; ++x)
        xi[x] = std::min(static_cast<int>(std::floor(x * sx)), in_w - 1);
      for (int y = 0; y < out_h; ++y)
        yi[y] = std::min(static_cast<int>(std::floor(y * sy)), in_h - 1);
    } else {
      // INTER_NEAREST_EXACT samples at pixel centres like Pillow's NEAREST; measured equal to
      // it index for index (OpenCV 5.1, sizes 1..1000), so both use one table.
      xi = PilNearestIndex(in_w, out_w);
      yi = PilNearestIndex(in_h, out_h);
    }
    const int c = static_cast<int>(in.channels);
    Image out(out_h, out_w, c);
    for (int y = 0; y < out_h; ++y) {
      const uint8_t* s = in.row(yi[y]);
      uint8_t* d = out.row(y);
      for (int x = 0; x < out_w; ++x) std::memcpy(d + x * c, s + xi[x] * c, c);
    }
    return out;
  }
  const int isx = CvRound(sx), isy = CvRound(sy);
  const bool area_fast = std::fabs(sx - isx) < DBL_EPSILON && std::fabs(sy - isy) < DBL_EPSILON;
  bool area = f == Filter::kCv2Area;
  // cv::resize turns an exact 2x reduction with INTER_LINEAR into the fast area mean.
  if (f == Filter::kCv2Linear && area_fast && isx == 2 && isy == 2) area = true;
  if (area && sx >= 1 && sy >= 1) {
    if (area_fast) return CvAreaFast(in, out_h, out_w, isx, isy);
    return CvArea(in, out_h, out_w);
  }
  if (f == Filter::kCv2Cubic) return CvSeparable<4, false>(in, out_h, out_w, CvKernel::kCubic);
  if (f == Filter::kCv2Lanczos4) return CvSeparable<8, true>(in, out_h, out_w, CvKernel::kLanczos4);
  return CvLinear(in, out_h, out_w, area);
}

}  // namespace

Image Resize(const Image& in, int64_t out_height, int64_t out_width, Filter filter) {
  const int oh = static_cast<int>(out_height), ow = static_cast<int>(out_width);
  switch (filter) {
    case Filter::kPilNearest: {
      if (oh == in.height && ow == in.width) return in;
      std::vector<int> xi = PilNearestIndex(static_cast<int>(in.width), ow);
      std::vector<int> yi = PilNearestIndex(static_cast<int>(in.height), oh);
      const int c = static_cast<int>(in.channels);
      Image out(oh, ow, c);
      for (int y = 0; y < oh; ++y) {
        const uint8_t* s = in.row(yi[y]);
        uint8_t* d = out.row(y);
        for (int x = 0; x < ow; ++x) std::memcpy(d + x * c, s + xi[x] * c, c);
      }
      return out;
    }
    case Filter::kPilBilinear:
      return PilResample(in, oh, ow, {PilBilinear, 1.0});
    case Filter::kPilBicubic:
      return PilResample(in, oh, ow, {PilBicubic, 2.0});
    case Filter::kPilLanczos:
      return PilResample(in, oh, ow, {PilLanczos, 3.0});
    case Filter::kPilBox:
      return PilResample(in, oh, ow, {PilBox, 0.5});
    case Filter::kTorchvisionBilinear:
      return TorchvisionResize(in, oh, ow, /*antialias=*/false);
    case Filter::kTorchvisionBilinearAa:
      return TorchvisionResize(in, oh, ow, /*antialias=*/true);
    default:
      return CvResize(in, oh, ow, filter);
  }
}

}  // namespace ferry::prep

// MaxPool on plain NCHW where oneDNN 2.6 has only its simple_nchw / ref implementations (uneven
// pads on large planes): the own row kernel (PlainMaxPoolRow) against a scalar model of the
// reference's rules, NaNs included, on every geometry below; and models with uneven pads
// (auto_pad SAME_UPPER / SAME_LOWER, end-only pads) on the cpu provider equal to the reference.
#include <gtest/gtest.h>

#include <limits>

#include "cpu/cpu_harness.h"
#include "ops/cpu/pool.h"

namespace ferry {
namespace {

using namespace cpu_test;

// The reference's rule, one output at a time.
float ModelMax(const std::vector<float>& x, const ops::cpu::VecPoolGeom& g, int64_t plane,
               int64_t oy, int64_t ox) {
  bool any = false;
  float m = 0.f;
  for (int64_t ky = 0; ky < g.kh; ++ky)
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      const int64_t iy = oy * g.sh - g.pt + ky * g.dh, ix = ox * g.sw - g.pl + kx * g.dw;
      if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
      const float v = x[static_cast<size_t>((plane * g.h + iy) * g.w + ix)];
      if (!any || v > m || (v != v && m == m)) m = v;
      any = true;
    }
  return any ? m : 0.f;
}

TEST(CpuPlainMaxPool, RowKernelKeepsTheReferenceRules) {
  struct Geo {
    int64_t h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  };
  const Geo geos[] = {
      {40, 40, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1},  // SAME_UPPER 2x2 stride 1 (PP-OCR)
      {17, 11, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},  // SAME_LOWER-like 3x3 stride 2
      {9, 30, 2, 3, 1, 2, 1, 1, 0, 1, 1, 1},
      {15, 13, 3, 2, 1, 1, 2, 2, 0, 0, 2, 1},  // dilated, end-only pads
      {6, 30, 1, 4, 1, 3, 1, 1, 0, 0, 0, 3},
      {5, 3, 3, 3, 1, 1, 1, 1, 2, 2, 2, 2},  // windows reaching past both sides
  };
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  for (const Geo& q : geos) {
    ops::cpu::VecPoolGeom g;
    g.images = 3;
    g.vc = 1;
    g.h = q.h;
    g.w = q.w;
    g.kh = q.kh;
    g.kw = q.kw;
    g.sh = q.sh;
    g.sw = q.sw;
    g.dh = q.dh;
    g.dw = q.dw;
    g.pt = q.pt;
    g.pl = q.pl;
    g.oh = (q.h + q.pt + q.pb - ((q.kh - 1) * q.dh + 1)) / q.sh + 1;
    g.ow = (q.w + q.pl + q.pr - ((q.kw - 1) * q.dw + 1)) / q.sw + 1;
    std::vector<float> x(static_cast<size_t>(g.images * g.h * g.w));
    for (float& v : x) v = u(rng);
    for (size_t i = 5; i < x.size(); i += 37) x[i] = std::numeric_limits<float>::quiet_NaN();
    x[1] = -std::numeric_limits<float>::infinity();
    std::vector<float> y(static_cast<size_t>(g.images * g.oh * g.ow), 123.f);
    for (int64_t p = 0; p < g.images; ++p)
      for (int64_t oy = 0; oy < g.oh; ++oy) ops::cpu::PlainMaxPoolRow(x.data(), y.data(), g, p, oy);
    int64_t bad = 0;
    for (int64_t p = 0; p < g.images; ++p)
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          const float want = ModelMax(x, g, p, oy, ox);
          const float got = y[static_cast<size_t>((p * g.oh + oy) * g.ow + ox)];
          if (!(got == want || (got != got && want != want))) ++bad;
        }
    EXPECT_EQ(bad, 0) << "geometry " << q.h << "x" << q.w << " k " << q.kh << "x" << q.kw;
  }
}

TEST(CpuPlainMaxPool, UnevenPadsOnTheCpuProviderMatchReference) {
  struct Case {
    Shape x;
    std::vector<int64_t> k, strides, pads;
    std::string auto_pad;
  };
  const Case cases[] = {
      {{1, 24, 160, 160}, {2, 2}, {1, 1}, {}, "SAME_UPPER"},  // PP-OCR's detector, smaller
      {{2, 3, 17, 11}, {3, 3}, {2, 2}, {}, "SAME_LOWER"},
      {{1, 4, 15, 13}, {3, 2}, {1, 1}, {0, 0, 2, 1}, "NOTSET"},
  };
  uint32_t seed = 4100;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.auto_pad + " " + ShapeToString(c.x));
    GraphBuilder b;
    b.Input("x", Rand(c.x, seed++, -3.f, 3.f));
    ir::Node& n = b.Node("MaxPool", {"x"}, {"y"});
    SetInts(n, "kernel_shape", c.k);
    SetInts(n, "strides", c.strides);
    if (!c.pads.empty()) SetInts(n, "pads", c.pads);
    if (c.auto_pad != "NOTSET") SetString(n, "auto_pad", c.auto_pad);
    b.Output("y");
    auto report = ExpectMatchesReference(b, 0, 0, 2);
    EXPECT_EQ(ProviderOfOp(report, "MaxPool"), "cpu");
  }
}

}  // namespace
}  // namespace ferry

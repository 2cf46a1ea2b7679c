// The vectorised Erf row kernel (vec_impl.inc) on every instruction-set table: within 4 ulp of
// erf in double over a dense sweep, odd, and NaN / +-inf / +-0 / subnormals handled.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/vec.h"

namespace ferry {
namespace {

double UlpError(float got, double want) {
  const float w = static_cast<float>(want);
  const float up = std::nextafter(w, std::numeric_limits<float>::infinity());
  const double ulp = std::max<double>(up - w, std::numeric_limits<float>::denorm_min());
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

void CheckTable(const ops::cpu::VecOps& t) {
  SCOPED_TRACE(t.isa);
  const auto erf = t.unary[static_cast<int>(ops::cpu::UnOp::kErf)];
  std::vector<float> x;
  for (int i = -600000; i <= 600000; ++i) x.push_back(static_cast<float>(i) * 1e-5f);
  for (float v :
       {1e-30f, -1e-30f, 1e-40f, 0.874999f, 0.875f, 0.875001f, 3.999f, 4.f, 4.001f, 10.f, 1e30f})
    x.push_back(v);
  std::vector<float> y(x.size());
  erf(x.data(), y.data(), static_cast<int64_t>(x.size()), 0.f, 0.f);
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double e = UlpError(y[i], std::erf(static_cast<double>(x[i])));
    if (e > worst) {
      worst = e;
      at = i;
    }
  }
  EXPECT_LE(worst, 4.0) << "at x = " << x[at] << ": " << y[at] << " vs "
                        << std::erf(static_cast<double>(x[at]));
  const float special[] = {std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), 0.f, -0.f};
  float out[5];
  erf(special, out, 5, 0.f, 0.f);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], 1.f);
  EXPECT_EQ(out[2], -1.f);
  EXPECT_EQ(out[3], 0.f);
  EXPECT_EQ(out[4], 0.f);
  EXPECT_TRUE(std::signbit(out[4]));
}

TEST(CpuErf, WithinFourUlpOnEveryInstructionSet) {
  CheckTable(ops::cpu::BaselineVec());
  if (ops::cpu::Avx2Vec()) CheckTable(*ops::cpu::Avx2Vec());
  if (ops::cpu::Avx512Vec()) CheckTable(*ops::cpu::Avx512Vec());
}

}  // namespace
}  // namespace ferry

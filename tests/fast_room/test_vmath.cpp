// The fast room's vector math (tapegrad/autograd/fast/vmath.h) against the exact functions in
// double: exp, the normal CDF and GELU to within float's reach, lane sums and maxima equal to
// the plain loops.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "helpers.h"
#include "tapegrad/autograd/autograd.h"
#include "tapegrad/autograd/fast/vmath.h"

using namespace tapegrad;

TEST_CASE("the vectorised float exp is within 2 ulp of std::exp", "[autograd]") {
  // Its naive twin is std::exp in double. 2 ulp of float is 2^-22 relative. Its range: up to 88.
  double worst = 0;
  for (double v = -87.3; v <= 88.0; v += 1e-3) {
    const auto x = static_cast<float>(v);
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(exp_poly(x) - want) / want);
  }
  CHECK(worst < 0x1.0p-22);
  CHECK(exp_poly(0.0f) == 1.0f);
  CHECK(exp_poly(-INFINITY) == 0.0f);  // masked scores
  CHECK(exp_poly(-100.0f) == 0.0f);    // below FLT_MIN: flushed
  CHECK(std::isnan(exp_poly(NAN)));
}

TEST_CASE("the vectorised float normal CDF and GELU are within float's reach of exact",
          "[autograd]") {
  // Its naive twin is the exact Phi in double: 3e-7 absolute (measured 2.3e-7: A&S's 1.5e-7 on
  // erf, halved, and float's roundings near 1, 6e-8 each); GELU and its slope to 3e-7 times
  // max(1, |x|).
  double worst_cdf = 0, worst_gelu = 0, worst_slope = 0;
  bool same_gelu = true;  // with or without its slope
  for (double v = -12; v <= 12; v += 1e-3) {
    const auto x = static_cast<float>(v);
    const double xd = x, cdf = std::erfc(-xd / std::sqrt(2.0)) / 2;
    const double pdf = std::exp(-xd * xd / 2) / std::sqrt(2 * std::numbers::pi);
    const double scale = std::max(1.0, std::abs(xd));
    worst_cdf = std::max(worst_cdf, std::abs(normal_cdf_poly(x) - cdf));
    float slope = 0;
    const float gelu = vgelu_and_slope(x, &slope);
    same_gelu = same_gelu && gelu == vgelu(x);
    worst_gelu = std::max(worst_gelu, std::abs(gelu - xd * cdf) / scale);
    worst_slope = std::max(worst_slope, std::abs(slope - (cdf + xd * pdf)) / scale);
  }
  CHECK(worst_cdf < 3e-7);
  CHECK(worst_gelu < 3e-7);
  CHECK(worst_slope < 3e-7);
  CHECK(same_gelu);
  CHECK(normal_cdf_poly(-INFINITY) == 0.0f);
  CHECK(normal_cdf_poly(INFINITY) == 1.0f);
  CHECK(std::isnan(vgelu(NAN)));
  CHECK(vgelu(2.0) == detail::gelu_of(2.0));  // float64 is the exact one
}

TEST_CASE("lane sums and maxima agree with the plain loops", "[autograd]") {
  Generator gen(31);
  for (int64_t n : {0, 1, 7, 8, 9, 200}) {
    const std::vector<double> x = uniform({n}, -5, 5, gen, DType::Float64).to_vector<double>();
    double sum = 0, maxv = -INFINITY;
    for (double v : x) {
      sum += v;
      maxv = std::max(maxv, v);
    }
    INFO("n = " << n);
    CHECK(lane_sum(x.data(), n) == Approx(sum).margin(1e-12));
    CHECK(lane_max(x.data(), n) == maxv);
  }
}

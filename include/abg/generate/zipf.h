// Zipf-distributed ranks: P(k) proportional to k^-s for k = 1..n, by
// Hörmann and Derflinger's rejection-inversion ("Rejection-inversion to
// generate variates from monotone discrete distributions", ACM TOMACS 6(3),
// 1996): bounded memory and constant expected time per draw for any n (the
// generator's entity counts reach 10^10), about one draw in a hundred
// rejected; s = 0 is uniform.
#pragma once

#include <cmath>
#include <cstdint>

#include "abg/generate/random.h"

namespace abg::generate {

class zipf_sampler {
public:
  /// n >= 1 ranks, exponent s >= 0.
  zipf_sampler(std::uint64_t n, double s);

  /// A 0-based rank: 0 is the most likely.
  std::uint64_t operator()(splitmix64& rng) const {
    while (true) {
      const double u = h_integral_n_ + rng.uniform() * (h_integral_x1_ - h_integral_n_);
      const double x = h_integral_inverse(u);
      auto k = static_cast<std::uint64_t>(x + 0.5);
      if (k < 1)
        k = 1;
      else if (k > n_)
        k = n_;
      const double kd = static_cast<double>(k);
      if (kd - x <= squeeze_ || u >= h_integral(kd + 0.5) - h(kd))
        return k - 1;
    }
  }

  std::uint64_t size() const { return n_; }
  double exponent() const { return s_; }
  /// P(rank = k), 0-based, exact (for tests): k^-s / H(n, s), the sum computed once per call.
  double probability(std::uint64_t k) const;

private:
  // h(x) = x^-s, and H, an antiderivative of h with H(1) = 0, and its inverse,
  // written with log1p/expm1 so that s near 1 loses no precision.
  double h(double x) const { return std::exp(-s_ * std::log(x)); }
  double h_integral(double x) const {
    const double log_x = std::log(x);
    return expm1_over((1.0 - s_) * log_x) * log_x;
  }
  double h_integral_inverse(double y) const {
    double t = y * (1.0 - s_);
    if (t < -1.0)
      t = -1.0; // rounding at the lower end
    return std::exp(log1p_over(t) * y);
  }
  // log(1 + x) / x. log() (about twice as fast as log1p, the hot spot of a
  // draw) loses under 1e-13 relative for |x| > 1e-3; below, four terms of the
  // series are exact to 1e-12.
  static double log1p_over(double x) {
    return std::abs(x) > 1e-3 ? std::log(1.0 + x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
  }
  static double expm1_over(double x) { // (e^x - 1) / x
    return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x));
  }

  std::uint64_t n_;
  double s_;
  double h_integral_x1_, h_integral_n_, squeeze_;
};

} // namespace abg::generate

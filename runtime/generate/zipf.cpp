#include "abg/generate/zipf.h"

#include <stdexcept>

namespace abg::generate {

zipf_sampler::zipf_sampler(std::uint64_t n, double s) : n_(n), s_(s) {
  if (n < 1 || !(s >= 0.0) || !std::isfinite(s))
    throw std::invalid_argument("zipf_sampler needs n >= 1 and a finite exponent >= 0");
  h_integral_x1_ = h_integral(1.5) - 1.0;
  h_integral_n_ = h_integral(static_cast<double>(n) + 0.5);
  // Draws within this distance below an integer are accepted without the test.
  squeeze_ = 2.0 - h_integral_inverse(h_integral(2.5) - h(2.0));
}

double zipf_sampler::probability(std::uint64_t k) const {
  double total = 0;
  for (std::uint64_t i = n_; i >= 1; --i)
    total += h(static_cast<double>(i));
  return h(static_cast<double>(k + 1)) / total;
}

} // namespace abg::generate

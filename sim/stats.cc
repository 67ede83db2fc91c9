#include "sim/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ringside::sim {

Interval WilsonInterval(int successes, int n, double z) {
  if (n <= 0) return {0, 1};
  successes = std::clamp(successes, 0, n);
  const double p = static_cast<double>(successes) / n;
  const double z2 = z * z;
  const double denom = 1 + z2 / n;
  const double centre = (p + z2 / (2.0 * n)) / denom;
  const double half = z * std::sqrt(p * (1 - p) / n + z2 / (4.0 * n * n)) / denom;
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

double NearestRankQuantile(std::vector<double> v, double q) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  q = std::clamp(q, 0.0, 1.0);
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[rank == 0 ? 0 : rank - 1];
}

double PoissonUpper95(int events) {
  if (events <= 0) return -std::log(0.05);  // exact for zero events: 2.996
  // Upper bound = chi²(0.95; 2(k+1)) / 2, by Wilson–Hilferty.
  const double k1 = events + 1.0;
  const double z = 1.6448536269514722;  // one-sided 95 %
  const double a = 1.0 - 1.0 / (9.0 * k1) + z / (3.0 * std::sqrt(k1));
  return k1 * a * a * a;
}

}  // namespace ringside::sim

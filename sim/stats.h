// Small statistics for the simulator's reports: how much a detection rate measured on n injected
// faults is worth (the Wilson score interval), quantiles of times to detect, and an upper bound
// on a false-alarm rate from a count of events (Poisson).
#ifndef RINGSIDE_SIM_STATS_H_
#define RINGSIDE_SIM_STATS_H_

#include <vector>

namespace ringside::sim {

// z of a two-sided 95 % interval.
inline constexpr double kZ95 = 1.959963984540054;

struct Interval {
  double lower = 0, upper = 1;
};

// The Wilson score interval of `successes` out of `n` trials (n = 0: [0, 1]). With every trial a
// success its lower bound is n / (n + z²): 0.79 at n = 15, 0.95 only from n = 73.
Interval WilsonInterval(int successes, int n, double z = kZ95);

// The q-quantile (0 ≤ q ≤ 1) of `v` by the nearest-rank method: the smallest value with at least
// q·n values at or below it (q = 0.5 of {1, 2, 3, 4} is 2). NaN for an empty vector.
double NearestRankQuantile(std::vector<double> v, double q);

// A one-sided 95 % upper bound on the mean of a Poisson count of which `events` were seen:
// 3.00 for none, 4.74 for one; the Wilson–Hilferty approximation of the chi-square quantile
// (within 1 % of the exact value from one event up).
double PoissonUpper95(int events);

}  // namespace ringside::sim

#endif  // RINGSIDE_SIM_STATS_H_

// timing.h: the lab programs' clock: the time per call of a run of calls, and a median over rounds.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

template <class F>
double per_call(F&& f, int calls) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; i++) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
}
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

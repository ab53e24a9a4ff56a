// harness/runner/studies.h: what a study is to the runner, and the registry it reads them from.
//
// The default run (`make bench`) answers the headline question: every workload on the five main
// backends, at the sizes that show where each one wins, with intervals and the check. Each of the
// seed papers' experiments is a study of its own (`make study NAME=...`, `bench_run --study NAME`):
// its backends, workloads and sizes, the extra measurement it may need (its phase), its own table
// and its figure. Each study is a folder of studies/ (studies/registry.h lists them), and the
// program hands the list to the runner (apps/bench_run.cc), which names none. `all` (`make
// bench-all`) runs everything: every backend and size, every study's phase.
// A run's own --backends, --workloads and --sizes replace a study's.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "harness/runner/backends.h"

namespace bp {

struct RunState;
struct Summary;

struct Study {
  std::string_view name;
  std::string_view question;   // what it answers, one line
  std::string_view backends;   // its backends ("": every one but the two-thread variants)
  std::string_view workloads;  // its workloads ("": every one)
  std::string_view sizes;      // its sizes, as --sizes values separated by spaces ("": defaults)
  void (*phase)(RunState&) = nullptr;              // what it measures after the benchmarks
  std::string (*table)(const Summary&) = nullptr;  // its table in summary.txt ("" without data)
  bool everything = false;                         // `all`: every study's phase
  std::span<const BackendSpec> rows = {};          // the backends it adds (its rows.h)
  int check_steps = 0;  // the models' training steps in the check (0: each workload's own)
};

// The studies of this program, in order (studies/registry.h, set by its main()).
inline std::span<const Study>& study_registry() {
  static std::span<const Study> registered;
  return registered;
}
inline std::span<const Study> studies() { return study_registry(); }

inline const Study* find_study(std::string_view name) {
  for (const Study& s : studies())
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace bp

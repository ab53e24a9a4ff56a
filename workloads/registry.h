// workloads/registry.h: the list of workloads, in the order runs and tables show them, and the
// one place their facts are read at run time.
//
// Adding a workload is one line in `Workloads` plus its own code (workloads/scalar.h,
// workloads/models.h, workloads/recurrent.h, workloads/gradbench.h, workloads/gradbench_tensor.h).
// Everything here is checked at compile time: each workload is exactly one kind (ScalarWorkload or
// ModelWorkload, workloads/workload.h), and names are unique and usable in benchmark names.
// Standard library only: bench_run includes this to expand and validate a selection without
// asking any backend.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>

#include "workloads/gradbench.h"
#include "workloads/gradbench_tensor.h"
#include "workloads/models.h"
#include "workloads/optimizer.h"
#include "workloads/plain_backend.h"
#include "workloads/recurrent.h"
#include "workloads/scalar.h"
#include "workloads/workload.h"

namespace bp {

using Workloads = std::tuple<EmptyStep, TinyGraph, SmallGraph, ScalarChain, CharMlp, MiniGpt,
                             MiniGptWide, MlpWidth, CharRnn, CharRnnWide, AdamWUpdate, Lse, Llsq,
                             Lstm, LstmTensor, GmmD2, GmmD10, GmmD2Tensor, GmmD10Tensor, Ode, Det>;

// Calls f.template operator()<W>() for every workload W, in registry order.
template <class F>
constexpr void for_each_workload(F&& f) {
  [&]<class... W>(std::tuple<W...>*) {
    (f.template operator()<W>(), ...);
  }(static_cast<Workloads*>(nullptr));
}

// A workload that fails here fails with the concept's own diagnostic of the fact it lacks. It is
// a model if it states either fact only models have, and a scalar graph otherwise.
template <class W>
constexpr bool is_one_kind() {
  static_assert(DescribedWorkload<W>, "a workload states name, times, sizes and tolerance");
  if constexpr (
      requires { W::check_steps; } || requires { W::corpus; }) {
    static_assert(ModelWorkload<W>,
                  "a model states every fact of workloads/workload.h's "
                  "ModelWorkload");
    static_assert(!ScalarWorkload<W>, "a workload is a scalar graph or a model, not both");
  } else {
    static_assert(ScalarWorkload<W>,
                  "a scalar graph states every fact of workloads/workload.h's "
                  "ScalarWorkload");
  }
  return true;
}

inline constexpr auto kWorkloads = []<class... W>(std::tuple<W...>*) {
  static_assert((is_one_kind<W>() && ...));
  return std::array<WorkloadInfo, sizeof...(W)>{info_of<W>()...};
}(static_cast<Workloads*>(nullptr));

// Names appear in benchmark names (`grad/<name>/...`), in flags and in file names.
constexpr bool valid_name(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}
constexpr bool registry_is_valid() {
  for (size_t i = 0; i < kWorkloads.size(); i++) {
    const Sizes& sizes = kWorkloads[i].sizes;
    if (!valid_name(kWorkloads[i].name) || (sizes.sized() && !valid_name(sizes.key))) return false;
    for (size_t j = 0; j < i; j++)
      if (kWorkloads[i].name == kWorkloads[j].name) return false;
  }
  return true;
}
static_assert(registry_is_valid(),
              "workload names and size keys are [a-z0-9_]+, and no two workloads share a name");

inline const WorkloadInfo* find_workload(std::string_view name) {
  for (const WorkloadInfo& w : kWorkloads)
    if (w.name == name) return &w;
  return nullptr;
}

// Why `size` is not a size `w` runs at, or "" if it is; the runner and the backend binaries
// both validate with this.
inline std::string size_error(const WorkloadInfo& w, int64_t size) {
  if (!w.sizes.sized()) return size == 0 ? "" : std::string(w.name) + " has no size (give none)";
  if (size >= w.sizes.min && size <= w.sizes.max) return "";
  return std::string(w.sizes.key) + "=" + std::to_string(size) + " is out of range for " +
         std::string(w.name) + " (" + std::to_string(w.sizes.min) + " to " +
         std::to_string(w.sizes.max) + ")";
}

// The answer of scalar graph `w` at `size` without autodiff (workloads/plain_backend.h), or
// false for a model, which has none: float32 training is compared across backends only.
inline bool plain_answer(const WorkloadInfo& w, int64_t size, PlainAnswer* out) {
  bool found = false;
  for_each_workload([&]<class W>() {
    if constexpr (ScalarWorkload<W>)
      if (W::name == w.name) *out = plain_answer<W>(size), found = true;
  });
  return found;
}

}  // namespace bp

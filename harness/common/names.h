// harness/common/names.h: the one place instances and benchmarks are named.
//
// An instance is one workload at one size, the same work on any backend: `<phase>/<workload>` or
// `<phase>/<workload>/<key>:<size>`, e.g. `grad/scalar_chain/nodes:1000`; a row of the summary.
// A benchmark is an instance on one backend with its thread count:
// `<phase>/<workload>/<backend>[/<key>:<size>]/threads:<n>`, e.g.
// `grad/scalar_chain/engine/nodes:1000/threads:1`. The phase says what is timed (`grad`: the
// gradient of a scalar graph; `step`: one training step). bench_run names every benchmark it runs
// and hands the name to the backend process (harness/common/protocol.h); nothing parses names back.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "workloads/workload.h"

namespace bp {

inline std::string size_label(const WorkloadInfo& w, int64_t size) {
  return w.sizes.sized() ? std::string(w.sizes.key) + ":" + std::to_string(size) : "";
}

inline std::string instance_id(const WorkloadInfo& w, int64_t size) {
  std::string id = std::string(w.phase) + "/" + std::string(w.name);
  if (w.sizes.sized()) id += "/" + size_label(w, size);
  return id;
}

inline std::string bench_name(const WorkloadInfo& w, int64_t size, std::string_view backend,
                              int threads) {
  std::string name = std::string(w.phase) + "/" + std::string(w.name) + "/" + std::string(backend);
  if (w.sizes.sized()) name += "/" + size_label(w, size);
  return name + "/threads:" + std::to_string(threads);
}

}  // namespace bp

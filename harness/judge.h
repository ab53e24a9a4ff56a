// harness/judge.h: the one place that decides whether a backend's answers are right.
//
// Backends report raw numbers (harness/protocol.h); the judge applies the facts of the registry
// (workloads/workload.h): the tolerance, the known answers, and what must repeat bit for bit.
// For one instance:
//  1. each backend's own record: it ran (else failed or skipped, with its reason); it holds every
//     number the protocol asks for, each finite; a repeated step equals the first exactly (a
//     second step after reset(), step 0 again after zero_grad, step 0 on a fresh setup: reset and
//     setup are deterministic); a known answer holds within its published tolerance;
//  2. the reference is the first backend, in the runner's fixed order of backends (never the
//     order of --backends), whose record passed 1;
//  3. every other backend that passed 1 is compared with the reference, every number, within
//     the workload's tolerance.
// So the verdicts do not depend on the order backends were listed or run in.
//   Tests: harness/harness_test.cc.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "harness/json.h"
#include "workloads/workload.h"

namespace bp {

struct Verdict {
  std::string backend;
  std::string status;   // ok | wrong | failed | skipped
  std::string message;  // why, when not ok
  bool is_reference = false;
  std::string reference;                   // whom it was compared with ("": no one)
  double max_rel_diff = 0, tolerance = 0;  // the largest difference to the reference and its limit
  std::string worst_at;                    // which number that was, e.g. "grads[1]"
};

// The numbers of a record in a fixed order, each with a label for messages.
struct Numbers {
  std::vector<std::string> labels;
  std::vector<double> values;  // NaN where the record has null or nothing
  void add(std::string label, const Json& v) {
    labels.push_back(std::move(label));
    values.push_back(v.is_number() ? v.number : NAN);
  }
  void add_all(const std::string& label, const Json& array) {
    for (size_t i = 0; i < array.array.size(); i++)
      add(fmt::format("{}[{}]", label, i), array.array[i]);
  }
};

// A scalar graph's step ({"value", "grads"}); a model's step 0 ({"loss", "grad_norms"}) and, with
// `losses`, its training losses.
inline Numbers step_numbers(const WorkloadInfo& w, const Json& step, const Json* losses = nullptr) {
  Numbers n;
  if (w.model) {
    n.add("step-0 loss", step["loss"]);
    n.add_all("grad_norms", step["grad_norms"]);
    if (losses) n.add_all("losses", *losses);
  } else {
    n.add("value", step["value"]);
    n.add_all("grads", step["grads"]);
  }
  return n;
}
inline Numbers record_numbers(const WorkloadInfo& w, const Json& record) {
  return w.model ? step_numbers(w, record["step0"], &record["losses"])
                 : step_numbers(w, record["step"]);
}

// Why a record does not hold up on its own, or "" if it does.
inline std::string self_check(const WorkloadInfo& w, const Json& record) {
  const Numbers n = record_numbers(w, record);
  const size_t expected_grads = w.model ? 0 : size_t(w.num_grads);
  if (!w.model && record["step"]["grads"].array.size() != expected_grads)
    return fmt::format("reported {} gradients; {} has {}", record["step"]["grads"].array.size(),
                       w.name, expected_grads);
  if (w.model && record["losses"].array.size() != size_t(w.check_steps))
    return fmt::format("reported {} training losses; the check asks for {}",
                       record["losses"].array.size(), w.check_steps);
  if (w.model && record["step0"]["grad_norms"].array.empty()) return "reported no gradient norms";
  for (size_t i = 0; i < n.values.size(); i++)
    if (!std::isfinite(n.values[i])) return fmt::format("{} is not a finite number", n.labels[i]);

  // Repeats: the same computation again must give the same bits.
  const std::vector<std::pair<const char*, const char*>> repeats =
      w.model
          ? std::vector<std::pair<
                const char*, const char*>>{{"step0_after_reset",
                                            "step 0 again after zero_grad and end_step (reset is "
                                            "broken)"},
                                           {"step0_fresh_setup",
                                            "step 0 on a second fresh setup (setup is not "
                                            "deterministic, or state leaks between setups)"}}
          : std::vector<std::pair<const char*, const char*>>{
                {"step_after_reset", "a second step after reset() (reset is broken)"}};
  const Numbers first = step_numbers(w, w.model ? record["step0"] : record["step"]);
  for (const auto& [field, what] : repeats) {
    const Numbers again = step_numbers(w, record[field]);
    if (again.values.size() != first.values.size())
      return fmt::format("{} reported {} numbers, the first {}", what, again.values.size(),
                         first.values.size());
    for (size_t i = 0; i < first.values.size(); i++)
      if (!(again.values[i] == first.values[i]))
        return fmt::format("{} gave {} = {} where the first gave {}", what, first.labels[i],
                           again.values[i], first.values[i]);
  }

  if (w.known.exists) {
    const Json& step = record["step"];
    double worst = std::fabs(step["value"].num_or(NAN) - w.known.value);
    std::string at = "value";
    for (size_t i = 0; i < w.known.num_grads; i++) {
      const double d = std::fabs(step["grads"].array[i].num_or(NAN) - w.known.grads[i]);
      if (!(d <= worst)) worst = d, at = fmt::format("grads[{}]", i);
    }
    if (!(worst <= w.known.tolerance))
      return fmt::format("off the known answer by {:.3g} at {} (tolerance {:.0e})", worst, at,
                         w.known.tolerance);
  }
  return "";
}

// records: every selected backend in the runner's fixed order, with its record for this instance
// (nullptr: the backend's check process died before writing it; `why` says how).
struct BackendRecord {
  std::string backend;
  const Json* record;
  std::string why_missing;
};

inline std::vector<Verdict> judge_instance(const WorkloadInfo& w,
                                           const std::vector<BackendRecord>& records) {
  std::vector<Verdict> out;
  int reference = -1;
  for (const BackendRecord& r : records) {
    Verdict v;
    v.backend = r.backend, v.status = "ok";
    if (!r.record) {
      v.status = "failed", v.message = r.why_missing;
    } else if (const std::string status = (*r.record)["status"].str_or("no status");
               status != "ok") {
      v.status = status == "skipped" ? "skipped" : "failed";
      v.message = (*r.record)["message"].str_or(status);
    } else if (std::string why = self_check(w, *r.record); !why.empty()) {
      v.status = "wrong", v.message = why;
    } else if (reference < 0) {
      reference = int(out.size());
      v.is_reference = true;
    }
    out.push_back(v);
  }
  if (reference < 0) return out;
  const Numbers ref = record_numbers(w, *records[size_t(reference)].record);
  for (size_t b = 0; b < out.size(); b++) {
    Verdict& v = out[b];
    if (v.status != "ok" || v.is_reference) continue;
    v.reference = out[size_t(reference)].backend;
    v.tolerance = w.tolerance.rel;
    const Numbers got = record_numbers(w, *records[b].record);
    if (got.values.size() != ref.values.size()) {
      v.status = "wrong";
      v.message = fmt::format("reported {} numbers; {} reported {}", got.values.size(), v.reference,
                              ref.values.size());
      continue;
    }
    for (size_t i = 0; i < ref.values.size(); i++) {
      const double d = std::fabs(got.values[i] - ref.values[i]) /
                       std::max(w.tolerance.floor, std::fabs(ref.values[i]));
      if (!(d <= v.max_rel_diff)) v.max_rel_diff = d, v.worst_at = ref.labels[i];
    }
    if (!(v.max_rel_diff <= w.tolerance.rel))
      v.status = "wrong",
      v.message = fmt::format("differs from {} by {:.3g} at {} (tolerance {:.0e})", v.reference,
                              v.max_rel_diff, v.worst_at, w.tolerance.rel);
  }
  return out;
}

}  // namespace bp

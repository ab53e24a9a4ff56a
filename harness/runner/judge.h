// harness/runner/judge.h: the one place that decides whether a backend's answers are right.
//
// Backends report raw numbers (harness/common/protocol.h); the judge applies the facts of the
// registry (workloads/workload.h): the tolerance, the known answers, and what must repeat bit for
// bit. For one instance:
//  1. each backend's own record: it ran (else failed or skipped, with its reason); it holds every
//     number the protocol asks for, each finite; a repeated step equals the first exactly (a
//     second step after reset(), step 0 again after zero_grad, step 0 on a fresh setup: reset and
//     setup are deterministic); a known answer holds within its published tolerance; a scalar
//     graph's value and gradients hold against the runner's own answer without autodiff (plain
//     doubles and finite differences, workloads/plain_backend.h);
//  2. the backends that passed 1 are compared pairwise, every number, within the workload's
//     tolerance. The reference is the backend most others agree with (the first in the runner's
//     fixed order on a tie); if it and those agreeing with it are more than half, they are ok
//     and the rest wrong, each told whom it differs from. Otherwise no one can say who is right:
//     every one is "disputed" (two backends that disagree on a model, which has no answer of its
//     own, are disputed). A backend that no other backend and no answer of the registry or of
//     finite differences confirmed is "unverified", never "ok".
//  3. rows under mixed precision (--precision=bf16) are judged apart, against the float32
//     reference and one another, at the workload's bf16_tolerance (workloads/workload.h); rows
//     whose bf16 products also sum in bfloat16 (their records say so) apart again, at
//     bf16_sums_tolerance.
// No verdict depends on the order backends were listed or run in, and none trusts one backend.
//   Tests: harness/runner/judge_test.cc.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/common/json.h"
#include "workloads/plain_backend.h"
#include "workloads/workload.h"

namespace bp {

struct Verdict {
  std::string backend;
  std::string status;   // ok | unverified | wrong | disputed | failed | out_of_memory | skipped
  std::string message;  // why, when not ok
  bool is_reference = false;
  std::string reference;     // whom it was compared with ("": no one)
  std::string confirmed_by;  // who agrees with it: backends, the known answer, finite differences
  double max_rel_diff = 0, tolerance = 0;  // the largest difference to the reference and its limit
  std::string worst_at;                    // which number that was, e.g. "grads[1]"
};

// The numbers of a record in a fixed order, each with a label for messages.
struct Numbers {
  std::vector<std::string> labels;
  std::vector<double> values;  // NaN where the record has null or nothing
  void add(std::string label, JsonView v) {
    labels.push_back(std::move(label));
    values.push_back(v.num_or(NAN));
  }
  void add_all(const std::string& label, JsonView array) {
    for (size_t i = 0; i < array.size(); i++) add(fmt::format("{}[{}]", label, i), array[i]);
  }
};

// A scalar graph's step ({"value", "grads"}); a model's step 0 ({"loss", "grad_norms"}) and, with
// `losses`, its training losses.
inline Numbers step_numbers(const WorkloadInfo& w, JsonView step,
                            std::optional<JsonView> losses = {}) {
  Numbers n;
  if (w.model) {
    n.add("step-0 loss", step["loss"]);
    n.add_all("grad_norms", step["grad_norms"]);
    if (losses) n.add_all("losses", *losses);
  } else {
    n.add("value", step["value"]);
    const JsonView grads = step["grads"];
    const JsonView of = step["grad_of"];  // a sample of many gradients: which each one is
    for (size_t i = 0; i < grads.size(); i++)
      n.add(fmt::format("grads[{}]", i < of.size() ? int64_t(of[i].num_or(-1)) : int64_t(i)),
            grads[i]);
  }
  return n;
}
inline Numbers record_numbers(const WorkloadInfo& w, JsonView record) {
  return w.model ? step_numbers(w, record["step0"], record["losses"])
                 : step_numbers(w, record["step"]);
}

// The largest relative difference between `ref` and `got` (over the larger magnitude of the two,
// as Python's math.isclose: the same figure whichever is the reference; below `floor`, absolute)
// into *worst, and where it is; NaN anywhere is the largest. "" if they do not have the same
// numbers.
inline std::string worst_difference(const Numbers& ref, const Numbers& got, double floor,
                                    double* worst) {
  if (ref.values.size() != got.values.size()) return "";
  std::string at = ref.labels.empty() ? "" : ref.labels[0];
  *worst = 0;
  for (size_t i = 0; i < ref.values.size(); i++) {
    const double d = std::fabs(got.values[i] - ref.values[i]) /
                     std::max(floor, std::max(std::fabs(ref.values[i]), std::fabs(got.values[i])));
    if (!(d <= *worst)) *worst = d, at = ref.labels[i];  // a NaN takes the place and stays
  }
  return at;
}

// Why a record does not hold up on its own, or "" if it does.
// `plain`: the scalar graph's answer without autodiff, or nullptr (models).
inline std::string self_check(const WorkloadInfo& w, JsonView record,
                              const PlainAnswer* plain = nullptr) {
  const Numbers n = record_numbers(w, record);
  const size_t reported = record["step"]["grads"].size();
  if (!w.model && w.num_grads != kGradsPerSize && reported != size_t(w.num_grads))
    return fmt::format("reported {} gradients; {} has {}", reported, w.name, w.num_grads);
  if (!w.model && plain && reported != plain->grads.size())
    return fmt::format("reported {} gradients; {} checks {} at this size", reported, w.name,
                       plain->grads.size());
  if (w.model && record["losses"].size() != size_t(w.check_steps))
    return fmt::format("reported {} training losses; the check asks for {}",
                       record["losses"].size(), w.check_steps);
  if (w.model && record["step0"]["grad_norms"].size() == 0) return "reported no gradient norms";
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
    const JsonView step = record["step"];
    double worst = std::fabs(step["value"].num_or(NAN) - w.known.value);
    std::string at = "value";
    for (size_t i = 0; i < w.known.num_grads; i++) {
      const double d = std::fabs(step["grads"][i].num_or(NAN) - w.known.grads[i]);
      if (!(d <= worst)) worst = d, at = fmt::format("grads[{}]", i);
    }
    if (!(worst <= w.known.tolerance))
      return fmt::format("off the known answer by {:.3g} at {} (tolerance {:.3g})", worst, at,
                         w.known.tolerance);
  }
  if (plain) {
    Numbers truth;
    truth.add("value", Json(plain->value));
    for (size_t i = 0; i < plain->grads.size(); i++)
      truth.add(fmt::format("grads[{}]", plain->grad_of[i]), Json(plain->grads[i]));
    for (size_t i = 0; i < truth.labels.size(); i++)
      if (truth.labels[i] != n.labels[i])
        return fmt::format(
            "reported {} where finite differences check {} (another parameter "
            "count: {} gradients)",
            n.labels[i], truth.labels[i], record["step"]["num_grads"].num_or(double(reported)));
    // Relative above 1, absolute below, beyond the differences' own rounding (gradients only).
    double worst = 0;
    std::string at;
    for (size_t i = 0; i < truth.values.size(); i++) {
      const double noise = i == 0 ? 0 : finite_difference_noise(plain->value);
      const double d = std::max(0.0, std::fabs(n.values[i] - truth.values[i]) - noise) /
                       std::max(1.0, std::fabs(truth.values[i]));
      if (!(d <= worst)) worst = d, at = truth.labels[i];
    }
    if (!(worst <= kFiniteDifferenceTolerance))
      return fmt::format("off finite differences by {:.3g} at {} (tolerance {:.3g})", worst, at,
                         kFiniteDifferenceTolerance);
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

// A verdict per record from what the record says of itself; `passed` gets the indices of those
// whose own check held, for the pairwise comparison.
inline std::vector<Verdict> self_verdicts(const WorkloadInfo& w,
                                          const std::vector<BackendRecord>& records,
                                          const PlainAnswer* plain, std::vector<size_t>* passed) {
  std::vector<Verdict> out;
  for (const BackendRecord& r : records) {
    Verdict v;
    v.backend = r.backend, v.status = "ok";
    if (!r.record) {
      v.status = "failed", v.message = r.why_missing;
    } else if (const std::string status = JsonView(*r.record)["status"].str_or("no status");
               status != "ok") {
      v.status = status == "skipped" || status == "out_of_memory" ? status : "failed";
      v.message = JsonView(*r.record)["message"].str_or(status);
    } else if (std::string why = self_check(w, *r.record, plain); !why.empty()) {
      v.status = "wrong", v.message = why;
    } else {
      passed->push_back(out.size());
    }
    out.push_back(v);
  }
  return out;
}

// Every passed backend measured against every other: diff[i][j] is j against i, `where` names
// the worst number, `agreeing[i]` counts those within tolerance of i.
struct Pairwise {
  std::vector<std::vector<double>> diff;
  std::vector<std::vector<std::string>> where;
  std::vector<size_t> agreeing;
  size_t most_agreed() const {
    size_t ref = 0;
    for (size_t i = 1; i < agreeing.size(); i++)
      if (agreeing[i] > agreeing[ref]) ref = i;
    return ref;
  }
};

inline Pairwise compare_pairwise(const WorkloadInfo& w, const std::vector<Numbers>& numbers) {
  const size_t n = numbers.size();
  Pairwise p{std::vector<std::vector<double>>(n, std::vector<double>(n, 0)),
             std::vector<std::vector<std::string>>(n, std::vector<std::string>(n)),
             std::vector<size_t>(n, 0)};
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < n; j++) {
      if (i == j) continue;
      p.where[i][j] = worst_difference(numbers[i], numbers[j], w.tolerance.floor, &p.diff[i][j]);
      if (p.where[i][j].empty()) p.diff[i][j] = INFINITY, p.where[i][j] = "the count of numbers";
      if (p.diff[i][j] <= w.tolerance.rel) p.agreeing[i]++;
    }
  return p;
}

inline std::vector<Verdict> judge_instance(const WorkloadInfo& w,
                                           const std::vector<BackendRecord>& records,
                                           const PlainAnswer* plain = nullptr) {
  std::vector<size_t> passed;  // indices into records and out
  std::vector<Verdict> out = self_verdicts(w, records, plain, &passed);
  if (passed.empty()) return out;

  const size_t n = passed.size();
  std::vector<Numbers> numbers;
  for (size_t i : passed) numbers.push_back(record_numbers(w, *records[i].record));
  const Pairwise pairs = compare_pairwise(w, numbers);
  const auto& diff = pairs.diff;
  const auto& where = pairs.where;
  const size_t ref = pairs.most_agreed();
  const auto& agreeing = pairs.agreeing;
  const bool majority = 2 * (agreeing[ref] + 1) > n;
  const std::string ref_name = out[passed[ref]].backend;
  const std::string answer = w.known.exists && plain ? "the known answer and finite differences"
                             : w.known.exists        ? "the known answer"
                             : plain                 ? "finite differences"
                                                     : "";

  std::vector<std::string> group;  // the reference and those agreeing with it
  for (size_t j = 0; j < n; j++)
    if (j == ref || diff[ref][j] <= w.tolerance.rel) group.push_back(out[passed[j]].backend);
  for (size_t j = 0; j < n; j++) {
    Verdict& v = out[passed[j]];
    v.tolerance = w.tolerance.rel;
    if (j != ref) v.reference = ref_name, v.max_rel_diff = diff[ref][j], v.worst_at = where[ref][j];
    std::vector<std::string> others;
    for (const std::string& g : group)
      if (g != v.backend) others.push_back(g);
    if (!answer.empty()) others.push_back(answer);
    if (!majority) {
      std::vector<std::string> differs;
      for (size_t k = 0; k < n; k++)
        if (k != j && !(diff[j][k] <= w.tolerance.rel))
          differs.push_back(
              fmt::format("{} ({:.3g} at {})", out[passed[k]].backend, diff[j][k], where[j][k]));
      v.status = "disputed";
      v.message = fmt::format("differs from {}, and no majority agrees to say who is right{}",
                              fmt::join(differs, ", "),
                              answer.empty() ? "" : fmt::format(" (each holds to {})", answer));
    } else if (j != ref && !(diff[ref][j] <= w.tolerance.rel)) {
      v.status = "wrong";
      v.message = fmt::format("differs from {} (who agree) by {:.3g} at {} (tolerance {:.3g})",
                              fmt::join(group, ", "), v.max_rel_diff, v.worst_at, v.tolerance);
    } else {
      v.is_reference = j == ref;
      v.confirmed_by = fmt::format("{}", fmt::join(others, ", "));
      if (others.empty()) {
        v.status = "unverified";
        v.message =
            "no other backend passed its check, and the workload has no answer of its own to "
            "hold it to";
      }
    }
  }
  return out;
}

// Whether a record says its bf16 products sum in bfloat16 ("bf16_sums": torch 1.13 without
// oneDNN's bf16 kernels, workloads/workload.h's kBf16SumsRelative).
inline bool sums_in_bf16(const BackendRecord& r) {
  return r.record && JsonView(*r.record)["bf16_sums"].str_or("") == "bfloat16";
}

// Mixed precision's rows (bf16[i]: records[i] ran under --precision=bf16) are judged apart, so
// that neither side's tolerance loosens the other's: the float32 rows as above; then the bf16 rows
// against the float32 reference (when it is ok) and one another, at bf16_tolerance (a majority
// of those decides as above); then, apart again, the bf16 rows whose products also sum in
// bfloat16, against the float32 reference and one another at bf16_sums_tolerance. A bf16 row is
// never the float32 rows' reference.
inline std::vector<Verdict> judge_instance(const WorkloadInfo& w,
                                           const std::vector<BackendRecord>& records,
                                           const std::vector<bool>& bf16,
                                           const PlainAnswer* plain = nullptr) {
  enum Group { kFloat32, kBf16, kBf16Sums };
  std::vector<BackendRecord> group[3];
  std::vector<size_t> at[3];  // each group's records' indices in `records`
  for (size_t i = 0; i < records.size(); i++) {
    const Group g = !bf16[i] ? kFloat32 : sums_in_bf16(records[i]) ? kBf16Sums : kBf16;
    group[g].push_back(records[i]), at[g].push_back(i);
  }
  std::vector<Verdict> out(records.size());
  const std::vector<Verdict> fp32 = judge_instance(w, group[kFloat32], plain);
  for (size_t k = 0; k < fp32.size(); k++) out[at[kFloat32][k]] = fp32[k];
  size_t reference = SIZE_MAX;
  // The float32 reference: ok, or the only float32 row that passed its own check (unverified,
  // with no other to agree: a --precision=bf16 run's float32 twin, check_phase.cc).
  for (size_t k = 0; k < fp32.size(); k++)
    if (fp32[k].is_reference && (fp32[k].status == "ok" || fp32[k].status == "unverified"))
      reference = k;
  for (const Group g : {kBf16, kBf16Sums}) {
    std::vector<BackendRecord>& lower = group[g];
    if (lower.empty()) continue;
    WorkloadInfo at_bf16 = w;
    at_bf16.tolerance = g == kBf16 ? bf16_tolerance(w.tolerance, w.product_depth)
                                   : bf16_sums_tolerance(w.tolerance);
    if (reference != SIZE_MAX) lower.insert(lower.begin(), group[kFloat32][reference]);
    const std::vector<Verdict> mixed = judge_instance(at_bf16, lower, nullptr);
    const size_t first = reference != SIZE_MAX ? 1 : 0;
    for (size_t k = first; k < mixed.size(); k++) out[at[g][k - first]] = mixed[k];
  }
  return out;
}

}  // namespace bp

// harness/runner/selection.h: the one parser of what a run selects. bench_run's --workloads,
// --sizes and
// --filter are expanded over the workload registry and validated here, once; every selected
// instance gets its benchmark name on every selected backend (harness/common/names.h), and the
// backend processes are told exactly those (harness/common/protocol.h). No backend is asked what
// exists.
//   Tests: harness/runner/selection_test.cc; harness/tests/ through bench_run.
#pragma once

#include <fmt/format.h>
#include <regex.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/common/names.h"
#include "harness/common/text.h"
#include "workloads/registry.h"

namespace bp {

struct SelectionRequest {
  std::vector<std::string> backends;                  // in the runner's fixed order
  std::string workloads;                              // "a,b"; empty: all
  std::vector<std::string> sizes;                     // each "key=n,n"
  std::string filter;                                 // a regex over benchmark names; empty: all
  std::function<int(const std::string&)> threads_of;  // the thread count in a backend's names
  // Whether a backend is measured on a workload at all (a variant made for one); null: all.
  std::function<bool(const std::string&, const WorkloadInfo&)> runs;
  // Why a backend leaves out one of a workload's default sizes ("": it does not); asked only
  // for sizes that came from the defaults, never for sizes given with --sizes; null: none.
  std::function<std::string(const std::string&, const WorkloadInfo&, int64_t)> default_skip;
  // If given, gets a line for each of `given_sizes` (the user's --sizes, not a study's) whose key
  // no selected workload is sized by (valid, as some workload has it, but it changes nothing).
  std::vector<std::string>* unused_sizes = nullptr;
  std::vector<std::string> given_sizes = {};
};

// One instance and its benchmark name on each backend the filter kept.
struct Selected {
  const WorkloadInfo* workload;
  int64_t size;
  std::string id;                              // the instance (harness/common/names.h)
  std::map<std::string, std::string> names;    // backend -> benchmark name, selected ones only
  std::map<std::string, std::string> skipped;  // backend -> why it is not run (default_skip)
};

// Google Benchmark 1.7.1's filter semantics: POSIX extended regex, a leading '-' negates, and
// "", "all" and "." match everything. A backslash before a letter or digit is undefined in POSIX
// and glibc reads `\d` as `d`: a filter written for Python or PCRE would silently select
// something else, so it is refused.
class NameFilter {
 public:
  explicit NameFilter(std::string pattern) {
    if (pattern.empty() || pattern == "all" || pattern == ".") return;
    if (pattern[0] == '-') negate_ = true, pattern.erase(0, 1);
    for (size_t i = 0; i + 1 < pattern.size(); i++)
      if (pattern[i] == '\\' && std::isalnum(static_cast<unsigned char>(pattern[++i])))
        bad_escape_ = pattern.substr(i - 1, 2);
    valid_ = bad_escape_.empty() && regcomp(&re_, pattern.c_str(), REG_EXTENDED | REG_NOSUB) == 0;
    active_ = valid_;
  }
  // "\d" when the pattern uses an escape POSIX does not have, else "".
  const std::string& bad_escape() const { return bad_escape_; }
  ~NameFilter() {
    if (active_) regfree(&re_);
  }
  NameFilter(const NameFilter&) = delete;
  NameFilter& operator=(const NameFilter&) = delete;
  bool valid() const { return valid_; }
  bool matches(const std::string& name) const {
    return !active_ || (regexec(&re_, name.c_str(), 0, nullptr, 0) == 0) != negate_;
  }

 private:
  regex_t re_{};
  std::string bad_escape_;
  bool valid_ = true, active_ = false, negate_ = false;
};

// The selected instances in registry order, or nothing with *error saying, in one line (and for
// a filter that matches nothing, a few names it could have matched), what is wrong and what is
// valid.
inline std::optional<std::vector<Selected>> select_instances(const SelectionRequest& r,
                                                             std::string* error) {
  auto fail = [error](std::string why) {
    *error = std::move(why);
    return std::nullopt;
  };
  std::vector<std::string> all_names, size_keys;
  for (const WorkloadInfo& w : kWorkloads) {
    all_names.emplace_back(w.name);
    if (w.sizes.sized() &&
        std::find(size_keys.begin(), size_keys.end(), w.sizes.key) == size_keys.end())
      size_keys.emplace_back(w.sizes.key);
  }
  const std::vector<std::string> chosen = fields(r.workloads, ',');
  for (const std::string& w : chosen)
    if (!find_workload(w))
      return fail(fmt::format("unknown workload '{}'; valid: {}", w, fmt::join(all_names, ", ")));
  std::map<std::string, std::vector<int64_t>> sizes;  // size key -> sizes given
  for (const std::string& spec : r.sizes) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      return fail(fmt::format("--sizes {}: expected KEY=N,N,... (e.g. nodes=10,1000)", spec));
    const std::string key = spec.substr(0, eq);
    if (std::find(size_keys.begin(), size_keys.end(), key) == size_keys.end())
      return fail(fmt::format("--sizes: no workload is sized by '{}'; size keys: {}", key,
                              fmt::join(size_keys, ", ")));
    for (const std::string& n : fields(spec.substr(eq + 1), ',')) {
      const std::optional<int64_t> v = parse_whole(n);
      if (!v) return fail(fmt::format("--sizes {}: '{}' is not a whole number", spec, n));
      sizes[key].push_back(*v);
    }
    if (sizes[key].empty()) return fail(fmt::format("--sizes {}: give at least one size", spec));
  }
  const NameFilter filter(r.filter);
  if (!filter.bad_escape().empty())
    return fail(fmt::format(
        "--filter '{}': {} is not POSIX extended regex (write [0-9] for \\d, [a-z_] for \\w)",
        r.filter, filter.bad_escape()));
  if (!filter.valid())
    return fail(fmt::format("--filter '{}' is not a valid regular expression", r.filter));
  std::vector<Selected> out;
  std::vector<std::string> every_name;  // for the message when the filter matches nothing
  for (const WorkloadInfo& w : kWorkloads) {
    std::vector<int64_t> list(w.sizes.defaults().begin(), w.sizes.defaults().end());
    const bool defaults = !(w.sizes.sized() && sizes.count(std::string(w.sizes.key)));
    if (!defaults) {
      list = sizes[std::string(w.sizes.key)];
      for (int64_t n : list)  // every workload sized by the key must accept it, selected or not
        if (std::string why = size_error(w, n); !why.empty()) return fail("--sizes: " + why);
    }
    if (!chosen.empty() && std::find(chosen.begin(), chosen.end(), w.name) == chosen.end())
      continue;
    for (int64_t size : list) {
      Selected s{&w, size, instance_id(w, size), {}, {}};
      for (const std::string& b : r.backends) {
        if (r.runs && !r.runs(b, w)) continue;
        const std::string name = bench_name(w, size, b, r.threads_of(b));
        every_name.push_back(name);
        if (!filter.matches(name)) continue;
        s.names[b] = name;
        if (std::string why = defaults && r.default_skip ? r.default_skip(b, w, size) : "";
            !why.empty())
          s.skipped[b] = std::move(why);
      }
      if (!s.names.empty()) out.push_back(std::move(s));
    }
  }
  if (r.unused_sizes)
    for (const std::string& spec : r.given_sizes) {
      const std::string key = spec.substr(0, spec.find('='));
      std::vector<std::string> sized_by;
      for (const WorkloadInfo& w : kWorkloads)
        if (w.sizes.key == key) sized_by.emplace_back(w.name);
      if (std::none_of(out.begin(), out.end(),
                       [&](const Selected& s) { return s.workload->sizes.key == key; }))
        r.unused_sizes->push_back(
            fmt::format("--sizes {}: no selected workload is sized by '{}' ({}), so it changes "
                        "nothing",
                        spec, key, fmt::join(sized_by, ", ")));
    }
  if (out.empty()) {
    if (every_name.size() > 6) every_name.resize(6), every_name.push_back("...");
    return fail(fmt::format("--filter '{}' matches no benchmark; names look like:\n  {}", r.filter,
                            fmt::join(every_name, "\n  ")));
  }
  return out;
}

}  // namespace bp

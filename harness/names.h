// harness/names.h: the one place benchmark names are built and parsed.
//
// A name is `<phase>/<workload>/<backend>/<key>:<value>/...`, e.g.
// `grad/scalar_chain/engine/nodes:1000/threads:1`. The phase says what is timed (`grad`: gradient
// of a scalar graph). Keys are the workload's size (if any), then `threads`. The runner, the
// summary table and plots/ all split names with these rules, never with guesses.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/text.h"

namespace bp {

struct NameKey {
  std::string key, value;
};

inline std::string bench_name(std::string_view phase, std::string_view workload,
                              std::string_view backend, const std::vector<NameKey>& keys) {
  std::string name;
  name.append(phase).append("/").append(workload).append("/").append(backend);
  for (const NameKey& k : keys) name.append("/").append(k.key).append(":").append(k.value);
  return name;
}

struct ParsedName {
  std::string phase, workload, backend;
  std::vector<NameKey> keys;

  // The same work on any backend: the name without its backend and threads, e.g.
  // `grad/scalar_chain/nodes:1000`. Rows of the summary table and of the check are instances.
  std::string instance() const {
    std::string s = phase + "/" + workload;
    for (const NameKey& k : keys)
      if (k.key != "threads") s += "/" + k.key + ":" + k.value;
    return s;
  }
};

// Parses a name built by bench_name; nullopt for anything else (a Google Benchmark aggregate
// suffix such as `_median` must be removed first).
inline std::optional<ParsedName> parse_bench_name(std::string_view name) {
  const std::vector<std::string> parts = split(name, '/');
  if (parts.size() < 3) return std::nullopt;
  ParsedName p{parts[0], parts[1], parts[2], {}};
  for (size_t i = 3; i < parts.size(); i++) {
    size_t colon = parts[i].find(':');
    if (colon == std::string::npos) return std::nullopt;
    p.keys.push_back({parts[i].substr(0, colon), parts[i].substr(colon + 1)});
  }
  for (const std::string& s : parts)
    if (s.empty()) return std::nullopt;
  return p;
}

}  // namespace bp

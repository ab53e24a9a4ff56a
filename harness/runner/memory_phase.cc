// harness/runner/memory_phase.cc: sizes beyond a workload's defaults, estimated before anything
// runs (harness/runner/memory.h). Each selected backend is measured at three smaller sizes in a
// scratch folder (removed at the end, or by the next run if this one is killed), the need
// extrapolated; a benchmark that would not fit under the memory limit is not run and is reported
// out of memory with the estimate, and the rest of the run goes on. A probe that itself ran out
// of memory proves the size cannot fit: it is refused, never estimated from a capped peak.
// --force skips the estimate: everything runs, each process capped by the limit.
#include <fmt/format.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>

#include "harness/runner/memory.h"
#include "harness/runner/run_state.h"
#include "harness/runner/summary_text.h"

namespace bp {
namespace {

// Scratch folders are named for the runner's pid, so a later run removes those of runners that
// died (SIGKILL leaves no chance to clean up).
constexpr const char* kScratchPrefix = "bench_run.memory.";

}  // namespace

// The data-parallel rows' temporary folder: in /dev/shm where there is one (Open MPI's shared
// memory goes there anyway), else the temporary folder.
fs::path ranks_scratch_parent() {
  std::error_code ec;
  return fs::is_directory("/dev/shm", ec) && access("/dev/shm", W_OK | X_OK) == 0
             ? fs::path("/dev/shm")
             : fs::temp_directory_path();
}

void remove_orphaned_scratch_folders() {
  std::error_code ec;
  for (const fs::path& dir : {fs::temp_directory_path(), ranks_scratch_parent()})
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      std::string_view rest;
      for (const char* prefix : {kScratchPrefix, kRanksScratchPrefix})
        if (name.rfind(prefix, 0) == 0) rest = std::string_view(name).substr(std::strlen(prefix));
      if (rest.empty()) continue;
      const std::optional<int64_t> pid = parse_whole(fields(std::string(rest), '.')[0]);
      if (pid && kill(pid_t(*pid), 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), ec);
    }
}

namespace {

// The probe's own record: a probe whose check ran out of memory (a status in its record, the
// process itself exiting 0) has a capped peak that says nothing of the need.
std::string probe_status(const fs::path& record_file) {
  try {
    const Json doc_json = parse_json(read_file(record_file));
    const JsonView doc = doc_json;
    if (!doc["records"].size() == 0) return doc["records"][0]["status"].str_or("failed");
  } catch (const std::exception&) {
  }
  return "failed";
}

}  // namespace

void estimate_memory(RunState& run) {
  if (run.opt.force) return;
  const fs::path tmp = fs::temp_directory_path();
  std::map<std::pair<std::string_view, std::string>, std::vector<MemorySample>> measured;
  std::map<std::pair<std::string_view, std::string>, std::string> failed;  // why a probe failed
  std::string scratch;
  for (const Selected& s : run.selected) {
    const std::vector<int64_t> sizes = probe_sizes(*s.workload, s.size);
    if (sizes.empty()) continue;
    for (const auto& [b, name] : s.names) {
      const auto key = std::pair{s.workload->name, b};
      std::vector<MemorySample>& got = measured[key];
      if (got.empty() && !failed.count(key)) {
        if (scratch.empty()) {
          std::string folder = (tmp / (kScratchPrefix + std::to_string(getpid()) + ".XXXXXX"));
          if (!mkdtemp(folder.data())) throw WriteError(tmp, errno);
          scratch = folder;
        }
        for (int64_t size : sizes) {
          std::vector<std::string> argv = run.command(b, s.workload->corpus.context > 0, scratch);
          argv.push_back("--check_out=" + scratch + "/probe.json");
          argv.push_back(instance_flag({.workload = std::string(s.workload->name),
                                        .size = size,
                                        .name = "probe",
                                        .check_steps = s.workload->model ? 1 : 0}));
          const ProcessResult p = run_process(argv, scratch + "/probe.log", run.opt.timeout,
                                              run.child_env(b), run.memory_limit_of(b));
          const std::string status = p.ok() ? probe_status(scratch + "/probe.json")
                                     : p.exit_code == kExitOutOfMemory ? "out_of_memory"
                                                                       : p.failure();
          if (status != "ok") {
            failed[key] = fmt::format("{}={}: {}", s.workload->sizes.key, size,
                                      status == "out_of_memory" ? "out of memory" : status);
            break;
          }
          got.push_back({size, double(p.max_rss_bytes)});
        }
      }
      if (failed.count(key)) {
        const std::string& why = failed[key];
        const bool oom = why.ends_with("out of memory");
        // A smaller size did not fit: this one cannot. Anything else could not be measured,
        // and is not refused: the cap still holds.
        fmt::print("{}", wrapped(fmt::format("memory estimate: {} on {}: {}{}", s.id, b,
                                             oom ? "none, a smaller size ran out of memory: "
                                                 : "none, its probe at ",
                                             why),
                                 4));
        if (oom) {
          const std::string line = fmt::format("its probe at {}", why);
          run.estimates.push_back(Json::object({{"instance", s.id},
                                                {"backend", b},
                                                {"bytes", Json()},
                                                {"how", line},
                                                {"not_run", true}}));
          run.not_run_for_memory(s, b, line);
        }
        continue;
      }
      const double need = extrapolate_bytes(got, s.size);
      std::vector<std::string> from;
      for (const MemorySample& m : got) from.push_back(human_bytes(m.bytes));
      const std::string line =
          fmt::format("{} on {}: about {} (peak RSS {} at {}={})", s.id, b, human_bytes(need),
                      fmt::join(from, ", "), s.workload->sizes.key, fmt::join(sizes, ", "));
      const bool too_big = run.opt.memory_limit > 0 && need > double(run.opt.memory_limit);
      fmt::print("{}", wrapped(fmt::format("memory estimate: {}{}", line,
                                           too_big ? ": above the limit, not run" : ""),
                               4));
      run.estimates.push_back(Json::object({{"instance", s.id},
                                            {"backend", b},
                                            {"bytes", need},
                                            {"how", line},
                                            {"not_run", too_big}}));
      if (too_big) run.not_run_for_memory(s, b, line);
    }
  }
  if (!scratch.empty()) fs::remove_all(scratch);
}

}  // namespace bp

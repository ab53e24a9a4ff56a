// harness/runner/bench_phase.cc: the benchmarks. Round by round, row by row: the benchmarks of a
// row run in processes alive together that take turns, one timed loop at a time
// (harness/common/protocol.h, --take_turns), each with its own wait4 peak RSS; then the next row.
// With K rounds the whole selection is run K times, each time with its share of the repetitions,
// and each benchmark's rounds are merged (merge_rounds, harness/runner/results.h): its
// repetitions then come from K processes minutes apart, and so do its interval and its pairs.
// A progress line per row says how far the run is and about how long is left.
#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <memory>

#include "harness/runner/bench_plan.h"
#include "harness/runner/run_state.h"

namespace bp {
namespace {

using Clock = std::chrono::steady_clock;

struct Running {
  std::string backend, name, log;
  std::vector<std::string> argv;
  std::unique_ptr<Child> child;
};

// A benchmark the check did not let run: its cell says why (skipped and out of memory stay what
// they are; anything else not ok is not run, with why).
void not_benchmarked(RunState& run, const Selected& s, const std::string& b, const Verdict& v,
                     int round, Cell& c) {
  c.status = v.status == "skipped" || v.status == "out_of_memory" ? v.status : "not_run";
  if (v.status == "skipped" || run.not_run_record(s, b))
    c.message = v.message;
  else if (v.status == "out_of_memory")
    c.message = fmt::format("out of memory in the check at {} under the limit of {}: {}", s.id,
                            human_bytes(double(run.opt.memory_limit)), v.message);
  else
    c.message = "check " + v.status + ": " + v.message;
  if (round == 0)
    run.add_process(RunState::process_json(b, "bench", s.names.at(b), "", "", c.status, c.message,
                                           ProcessResult{}));
}

// A data-parallel row's steps a repetition: --min-time's worth at its check's step time, 5 at
// least (every rank runs the same number, so they cannot each watch a clock).
int ranks_iterations(const Options& o, const BenchPlan& plan) {
  if (!(plan.step_seconds > 0)) return 20;
  return int(std::clamp(std::ceil(o.min_time / plan.step_seconds), 5.0, 100000.0));
}

// The command lines of a row's benchmarks in this round, and the cells of those not run.
std::vector<Running> plan_row(RunState& run, const Selected& s, int round,
                              std::map<std::string, Cell>& cells) {
  std::vector<Running> running;
  for (const std::string& b : run.opt.backends) {
    if (!s.names.count(b)) continue;
    const BenchPlan plan = plan_of(run, s, b);
    if (round >= plan.rounds) continue;
    const std::string name = s.names.at(b), stem = file_stem(name);
    // this round's share of the repetitions; its files and logs carry its number
    const std::string suffix = plan.rounds > 1 ? fmt::format(".round{}", round + 1) : "";
    Cell& c = cells[b];
    const Verdict& v = run.verdicts[s.id][b];
    c.verified = v.status == "ok";
    if (v.status != "ok" && v.status != "unverified") {
      not_benchmarked(run, s, b, v, round, c);
      continue;
    }
    c.file = b + "/" + stem + suffix + ".json";
    std::vector<std::string> argv = run.command(b, s.workload->corpus.context > 0);
    argv.insert(argv.end(), {run.instance_arg(s, b),
                             "--benchmark_out=" + (run.folder.dir() / c.file).string() + ".partial",
                             "--benchmark_out_format=json",
                             fmt::format("--benchmark_repetitions={}", plan.repetitions_in(round)),
                             fmt::format("--benchmark_min_time={}", run.opt.min_time),
                             fmt::format("--warmup_steps={}", plan.warmup_steps),
                             "--benchmark_display_aggregates_only=true"});
    // A data-parallel row runs alone (its ranks wait on each other every step, so no turns): the
    // same number of steps on every rank, about --min-time's worth as its check timed them.
    if (spec_of(b).launcher)
      argv.push_back(fmt::format("--iterations={}", ranks_iterations(run.opt, plan)));
    else
      argv.push_back("--take_turns");
    if (plan.warm_once) argv.push_back("--warm_once");
    running.push_back({b, name, "logs/" + b + "/" + stem + suffix + ".log", std::move(argv), {}});
  }
  return running;
}

// Resuming: a row whose benchmarks all finished well before the interrupt is read, not run.
bool reuse_finished_row(RunState& run, const std::vector<Running>& running, int round,
                        std::map<std::string, Cell>& cells) {
  if (running.empty() || run.opt.resume.empty()) return false;
  std::map<std::string, Cell> kept = cells;
  for (const Running& r : running) {
    auto p = run.finished.find(r.name + "#" + std::to_string(round));
    if (p == run.finished.end() || JsonView(p->second)["status"].str_or("") != "ok") return false;
    Cell& c = kept[r.backend];
    try {
      const Json file_json = parse_benchmark_json(read_file(run.folder.dir() / c.file));
      const JsonView file = file_json;
      c.max_rss_bytes = JsonView(p->second)["max_rss_bytes"].num_or(NAN);
      c.take(read_benchmark_result(file));
      if (c.status != "ok") return false;
      if (!run.contexts.count(r.backend)) run.contexts[r.backend] = file["context"].json();
    } catch (const std::exception&) {
      return false;
    }
  }
  cells = std::move(kept);
  return true;
}

// At a timeout each rank said where it was (harness/driver/rank_progress.h): "rank R: in timed
// step N" (waiting there for the others, as a step waits on every rank) or "rank R: between timed
// steps, N done". A rank stopped by a signal (SIGSTOP, a debugger) can say nothing: the runner
// read every rank's state before it asked (ranks_at_timeout), and such a rank is the one named,
// not the furthest behind of those that answered, who were waiting for it. Otherwise the rank
// furthest behind is the one that stopped, if it alone is.
std::string rank_that_stopped(const std::string& log, const std::vector<RankAtTimeout>& ranks) {
  std::vector<std::string> stopped;
  for (const RankAtTimeout& r : ranks)
    if (r.state == 'T' || r.state == 't')
      stopped.push_back(fmt::format(
          "rank {} (pid {}) was stopped ({}) and could not answer", r.rank.empty() ? "?" : r.rank,
          r.pid, r.state == 'T' ? "by a signal: SIGSTOP, SIGTSTP or a debugger" : "by a debugger"));
  if (!stopped.empty())
    return fmt::format("{}; the others waited for it", fmt::join(stopped, "; "));
  std::vector<std::pair<int64_t, std::string>> seen;  // (how far, its line)
  for (const std::string& line : split(log, '\n')) {
    long rank = -1, step = -1;
    if (std::sscanf(line.c_str(), "rank %ld: in timed step %ld", &rank, &step) == 2)
      seen.push_back({2 * step + 1, line});
    else if (std::sscanf(line.c_str(), "rank %ld: between timed steps, %ld done", &rank, &step) ==
             2)
      seen.push_back({2 * step, line});
  }
  if (seen.empty()) return "";
  std::sort(seen.begin(), seen.end());
  if (seen.size() > 1 && seen[0].first == seen[1].first) return "";
  return seen[0].second +
         fmt::format(" (the furthest behind of the {} that answered)", seen.size());
}

// A data-parallel row that failed: which rank, in its launcher's words (mpirun: "process rank 1
// with PID ... exited on signal 6"; torchrun: a block per failed rank, "rank : 1 (local_rank: 1)"
// then "exitcode : -6", the rank a signal ended first, as the others fail after it), or, timed out,
// that the ranks waited on one another until the runner ended them all.
std::string ranks_failure(const RunState& run, const Running& r, const ProcessResult& p) {
  const bool timed_out = p.timed_out;
  const char* launcher = spec_of(r.backend).launcher;
  if (!launcher) return "";
  const auto trim = [](std::string t) {
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.erase(0, 1);
    return t;
  };
  std::string said, signalled, rank;
  for (const std::string& line : split(read_file(run.folder.dir() / r.log), '\n')) {
    if (std::string_view(launcher) == "mpirun") {
      if (const size_t at = line.find("process rank "); at != std::string::npos && said.empty())
        said = trim(line.substr(at));
      continue;
    }
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (key == "rank") rank = value;
    if (key != "exitcode" || rank.empty()) continue;
    const std::string failed = fmt::format("rank {}, exit code {}", rank, value);
    if (said.empty()) said = failed;
    if (value.starts_with("-") && signalled.empty()) signalled = failed + " (a signal)";
  }
  if (!signalled.empty()) said = signalled;
  if (!said.empty()) return fmt::format("; {} of {} ranks: {}", launcher, run.opt.ranks, said);
  if (!timed_out) return "";
  if (const std::string stopped =
          rank_that_stopped(read_file(run.folder.dir() / r.log), p.ranks_at_timeout);
      !stopped.empty())
    return fmt::format("; {} of {} ranks: {}", launcher, run.opt.ranks, stopped);
  return fmt::format(
      "; {} ranks under {}: every rank waits for the others at each step, so one that stops "
      "holds them all until the timeout ends the launcher and its ranks",
      run.opt.ranks, launcher);
}

// What a finished benchmark process leaves: its result file (renamed from .partial only when it
// ended well: a file cut short is removed, its log keeps what it printed), its cell, and its
// record for processes.json.
Json process_ended(RunState& run, const Selected& s, Running& r, Cell& c) {
  const ProcessResult p = r.child->finish();
  const fs::path partial = run.folder.dir() / (c.file + ".partial");
  if (p.ok()) {
    if (rename(partial.c_str(), (run.folder.dir() / c.file).c_str()) != 0 && errno != ENOENT)
      throw WriteError(run.folder.dir() / c.file, errno);
  } else {  // nor does an older copy stay (a resumed run's row that failed this time)
    std::error_code ec;
    fs::remove(partial, ec);
    fs::remove(run.folder.dir() / c.file, ec);
    c.file.clear();
  }
  c.max_rss_bytes = double(p.max_rss_bytes);
  if (p.interrupted) {
    c.status = "interrupted", c.message = "interrupted; --resume runs it again";
  } else if (p.exit_code == kExitOutOfMemory) {
    c.status = "out_of_memory";
    // The backend's own line (the protocol's "out of memory: ..."): the allocation it refused.
    std::string said;
    for (const std::string& line : split(read_file(run.folder.dir() / r.log), '\n'))
      if (line.rfind("out of memory: ", 0) == 0) said = ": " + line.substr(15);
    c.message = fmt::format("out of memory at {} under the limit of {}{}{} (see {})", s.id,
                            human_bytes(double(run.memory_limit_of(r.backend))),
                            spec_of(r.backend).launcher ? " per rank" : "", said, r.log);
  } else if (const std::string line = p.ok() ? "" : run.memory_failure_line(r.log); !line.empty()) {
    c.status = "out_of_memory";
    c.message = fmt::format("could not start under the memory limit of {}{}: {} (see {})",
                            human_bytes(double(run.memory_limit_of(r.backend))),
                            spec_of(r.backend).launcher ? " per rank" : "", line, r.log);
  } else if (!p.ok()) {
    c.status = p.timed_out ? "timeout" : "failed";
    c.message = p.failure() + ranks_failure(run, r, p) + " (see " + r.log + ")";
    if (p.signal == SIGKILL && !p.timed_out)  // not sent by the runner
      c.message += fmt::format(
          "; a SIGKILL the runner did not send: most likely the kernel's out-of-memory killer "
          "(peak RSS {})",
          human_mb(c.max_rss_bytes));
  } else {
    try {
      const Json file_json = parse_benchmark_json(read_file(run.folder.dir() / c.file));
      const JsonView file = file_json;
      c.take(read_benchmark_result(file));
      if (!run.contexts.count(r.backend)) run.contexts[r.backend] = file["context"].json();
    } catch (const std::exception& e) {
      c.status = "failed", c.message = fmt::format("{}: {}", c.file, e.what());
    }
  }
  return RunState::process_json(r.backend, "bench", r.name, c.file, r.log, c.status, c.message, p);
}

// One row's benchmarks in one round: started one after another, each once the one before is
// ready (set up and warmed up), then turns in the backends' order until every process ended.
std::map<std::string, Cell> bench_row(RunState& run, const Selected& s, int round, bool* reused) {
  std::map<std::string, Cell> cells;
  std::vector<Running> running = plan_row(run, s, round, cells);
  if ((*reused = reuse_finished_row(run, running, round, cells))) return cells;
  const auto row_start = Clock::now();
  auto start = [&](Running& r, bool takes_turns) {
    run.make_folders({run.folder.dir() / r.backend, run.folder.dir() / "logs" / r.backend});
    run.note_other_benchmarks();
    r.child = std::make_unique<Child>(r.argv, (run.folder.dir() / r.log).string(), run.opt.timeout,
                                      run.child_env(r.backend), run.memory_limit_of(r.backend),
                                      takes_turns);
  };
  Turns turns;
  for (Running& r : running)
    if (!spec_of(r.backend).launcher)
      start(r, true),
          turns.add(
              *r.child, spec_of(r.backend).measures_in_setup,
              run.opt.background_rows_only && run.loaded(r.backend) ? &run.background : nullptr);
  turns.take();
  for (Running& r : running)  // data-parallel rows after the turns, one at a time, alone
    if (spec_of(r.backend).launcher && !g_interrupted) {
      const bool loaded = run.opt.background_rows_only && run.loaded(r.backend);
      if (loaded) run.background.resume();
      start(r, false);
      r.child->ask_children_at_timeout();
      r.child->finish();
      if (loaded) run.background.pause();
    }
  for (Running& r : running) {
    if (!r.child) {  // a data-parallel row the interrupt came before
      cells[r.backend].status = "interrupted";
      cells[r.backend].message = "interrupted; --resume runs it again";
      continue;
    }
    Json record = process_ended(run, s, r, cells[r.backend]);
    std::vector<double> when;  // seconds from the row's start: the order the turns went in
    for (const auto& t : r.child->turns())
      when.push_back(std::round(std::chrono::duration<double>(t - row_start).count() * 1e4) / 1e4);
    const BenchPlan plan = plan_of(run, s, r.backend);
    record.update(Json::object({{"round", round + 1},
                                {"repetitions", plan.repetitions_in(round)},
                                {"warmup_steps", plan.warmup_steps},
                                {"warm_once", plan.warm_once},
                                {"turns", json_numbers(when)}}));
    run.add_process(std::move(record));
  }
  return cells;
}

// One benchmark's rounds as one cell: every round ok, their files merged into <stem>.json;
// otherwise the first round that was not ok says why (a round never reached: interrupted).
Cell merged(RunState& run, const Selected& s, const std::string& b,
            const std::vector<Cell>& cells) {
  for (const Cell& c : cells)
    if (c.status != "ok") return c;
  const int planned = plan_of(run, s, b).rounds;
  if (int(cells.size()) < planned) {
    Cell c = cells.back();
    c.status = "interrupted", c.message = "interrupted before its last round";
    return c;
  }
  if (planned == 1) return cells[0];
  Cell c = cells[0];
  c.file = b + "/" + file_stem(s.names.at(b)) + ".json";
  try {
    std::vector<Json> files;
    for (const Cell& round : cells)
      files.push_back(parse_benchmark_json(read_file(run.folder.dir() / round.file)));
    const Json merged_file = merge_rounds(files);
    write_atomically(run.folder.dir() / c.file, dump_json(merged_file, 2, 3) + "\n");
    c.take(read_benchmark_result(merged_file));
    for (const Cell& round : cells)
      c.max_rss_bytes = std::max(c.max_rss_bytes, round.max_rss_bytes);
  } catch (const WriteError&) {
    throw;
  } catch (const std::exception& e) {
    c.status = "failed", c.message = fmt::format("merging its rounds: {}", e.what());
  }
  return c;
}

void print_row(const RunState& run, const Selected& s, const std::map<std::string, Cell>& row,
               bool reused) {
  for (const std::string& b : run.opt.backends) {
    if (!row.count(b)) continue;
    const Cell& c = row.at(b);
    size_t name_width = 11;  // the row's names in one column
    for (const auto& [other, unused] : row) name_width = std::max(name_width, other.size());
    fmt::print("    {:<{}} {}", b, name_width, reused ? "(before the interrupt) " : "");
    const BenchPlan p = plan_of(run, s, b);
    if (c.status == "ok")
      fmt::print("{:>10}  peak RSS {:>9}{}\n", human_time(c.median_seconds),
                 human_mb(c.max_rss_bytes),
                 p.shortened ? fmt::format("  ({} repetitions: {} a step in its check)",
                                           p.repetitions, human_time(p.step_seconds))
                             : "");
    else
      fmt::print("{}: {}\n", c.status, c.message);
  }
}

}  // namespace

void bench_phase(RunState& run) {
  Progress progress = plan_progress(run);
  progress.announce(run);
  ByCell<std::vector<Cell>> rounds;  // instance -> backend -> its cell in each round so far
  for (int round = 0; round < run.opt.rounds && !g_interrupted; round++)
    for (const Selected& s : run.selected) {
      if (g_interrupted) break;
      if (!progress.start_row(run, s, round)) continue;
      bool reused = false;
      const std::map<std::string, Cell> row = bench_row(run, s, round, &reused);
      progress.end_row(s, round);
      print_row(run, s, row, reused);
      for (const auto& [b, c] : row) rounds[s.id][b].push_back(c);
    }
  for (const Selected& s : run.selected)
    for (auto& [b, cells] : rounds[s.id]) {
      Cell c = merged(run, s, b, cells);
      if (c.status != "ok" && c.status != "skipped" && c.status != "interrupted") run.failures++;
      run.cells[s.id][b] = std::move(c);
    }
}

}  // namespace bp

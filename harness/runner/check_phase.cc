// harness/runner/check_phase.cc: the correctness check. One process per backend, told exactly
// its selected instances (--jobs of them at once with --check-only, one after another
// otherwise: a step the check times decides how the benchmark runs); then the judge
// (harness/runner/judge.h), per instance over every selected backend; check.json; one line per
// backend saying how closely it agreed, and every instance that did not.
#include <fmt/format.h>

#include <chrono>
#include <deque>
#include <memory>
#include <thread>

#include "harness/runner/run_state.h"
#include "harness/runner/summary_text.h"

namespace bp {
namespace {

// A record line that is not JSON (a bare NaN, a line cut short) stands for a failed record of
// the benchmark it names, saying why, rather than for none ("not reported").
Json unreadable_record(const std::string& line, const std::string& why) {
  const size_t open = line.find(':'), quote = line.find('"', open + 1);
  const size_t end = quote == std::string::npos ? quote : line.find('"', quote + 1);
  if (end == std::string::npos) return Json();
  return Json::object({{"name", line.substr(quote + 1, end - quote - 1)},
                       {"status", "failed"},
                       {"message", "its check record is not valid JSON (" + why + ")"}});
}

// A check file's records by benchmark name. A check process that died mid-way leaves its file
// cut short under `<file>.tmp` (it renames the file when every record is in); its records are one
// per line, so every complete one is still read.
std::map<std::string, Json> read_check_records(const fs::path& path) {
  std::map<std::string, Json> out;
  std::error_code ec;
  const fs::path cut_short = path.string() + ".tmp";
  const std::string text = read_file(fs::exists(path, ec) ? path : cut_short);
  try {
    const Json doc_json = parse_json(text);
    const JsonView doc = doc_json;
    for (JsonView r : doc["records"].elements()) out[r["name"].str_or("")] = r.json();
    return out;
  } catch (const std::exception&) {
  }
  auto add = [&out](Json record) {
    const std::string name = JsonView(record)["name"].str_or("");
    out[name] = std::move(record);
  };
  for (std::string line : split(text, '\n')) {  // "  {record}," per line
    while (!line.empty() && line[0] == ' ') line.erase(0, 1);
    while (!line.empty() && line.back() == ',') line.pop_back();
    if (line.rfind("{\"name\"", 0) != 0) continue;
    try {
      add(parse_json(line));
    } catch (const std::exception& e) {  // a whole line (cut short, it ends without a brace)
      if (line.back() != '}') continue;
      if (Json r = unreadable_record(line, e.what()); !r.is_null()) add(std::move(r));
    }
  }
  return out;
}

struct CheckJob {
  std::string backend, file, log;
  std::vector<std::string> argv;
  size_t count = 0, decided = 0;  // instances it checks; the runner's own records
  std::string as;                 // whose records these are ("": the backend's)
  const std::string& key() const { return as.empty() ? backend : as; }
};

// Under --precision=bf16 every row runs in bf16, and a model has no answer of its own: its bf16
// rows can split two against two with no one to say who is right. The reference backend checks
// once more in float32 (the same program without --precision=bf16), and the judge holds the bf16
// rows against it and one another, as in a run that mixes precisions (judge.h, 3). Its verdict is
// in check.json under this name; it has no column and no benchmark.
constexpr const char* kFloat32Twin = "float32_reference";

using Records = std::map<std::string, std::map<std::string, Json>>;  // backend -> name -> record

// The check process of each backend that has something to check; a backend with nothing to run
// (filtered out, or all decided by the runner), or whose check an interrupted run finished,
// gets its records here and no process.
std::vector<CheckJob> plan_checks(RunState& run, Records& records) {
  std::vector<CheckJob> jobs;
  for (const std::string& b : run.opt.backends) {
    CheckJob job{b, "check/" + b + ".json", "logs/" + b + ".check.log", {}};
    bool reads_corpus = false;
    for (const Selected& s : run.selected)
      reads_corpus |= s.names.count(b) && s.workload->corpus.context;
    job.argv = run.command(b, reads_corpus);
    job.argv.push_back("--check_out=" + (run.folder.dir() / job.file).string());
    for (const Selected& s : run.selected) {
      if (!s.names.count(b)) continue;
      if (run.not_run_record(s, b))  // the runner's own record stands for it (add_not_run)
        job.decided++;
      else
        job.argv.push_back(run.instance_arg(s, b)), job.count++;
    }
    if (job.count == 0) {
      run.add_not_run(b, records[b]);
      fmt::print(
          "check {:<11} {}\n", b,
          job.decided ? fmt::format("{} instances not run", job.decided) : "nothing selected");
      continue;
    }
    if (!run.opt.resume.empty()) {  // a check that reported every instance is not run again
      records[b] = read_check_records(run.folder.dir() / job.file);
      size_t reported = 0;
      for (const Selected& s : run.selected)
        reported += s.names.count(b) && records[b].count(s.names.at(b));
      if (reported == job.count) {
        fmt::print("check {:<11} {} of {} instances reported by the interrupted run\n", b, reported,
                   job.count);
        run.add_not_run(b, records[b]);
        continue;
      }
    }
    jobs.push_back(std::move(job));
  }
  const std::string& ref = run.opt.backends.front();
  if (run.opt.bf16 && !backend_in_bf16(ref) && !spec_of(ref).launcher) {
    CheckJob twin{ref,
                  "check/" + std::string(kFloat32Twin) + ".json",
                  "logs/" + std::string(kFloat32Twin) + ".check.log",
                  {}};
    twin.as = kFloat32Twin;
    bool reads_corpus = false;
    for (const Selected& s : run.selected)
      reads_corpus |= s.names.count(ref) && s.workload->corpus.context;
    for (std::string& a : run.command(ref, reads_corpus))
      if (a != "--precision=bf16") twin.argv.push_back(std::move(a));
    twin.argv.push_back("--check_out=" + (run.folder.dir() / twin.file).string());
    for (const Selected& s : run.selected)
      if (s.names.count(ref) && !run.not_run_record(s, ref))
        twin.argv.push_back(run.instance_arg(s, ref)), twin.count++;
    if (!run.opt.resume.empty()) {  // reported whole by the interrupted run: not run again
      Records done;
      done[kFloat32Twin] = read_check_records(run.folder.dir() / twin.file);
      if (done[kFloat32Twin].size() == twin.count) {
        records[kFloat32Twin] = std::move(done[kFloat32Twin]);
        twin.count = 0;
      }
    }
    if (twin.count) jobs.push_back(std::move(twin));
  }
  return jobs;
}

// What a check process that ended says: its records, its line, its process record.
void check_ended(RunState& run, const CheckJob& job, const ProcessResult& p, Records& records,
                 std::map<std::string, std::string>& died, bool one_at_a_time) {
  const std::string& b = job.key();
  records[b] = read_check_records(run.folder.dir() / job.file);
  run.add_not_run(b, records[b]);
  std::string status = "ok", message;
  const std::string no_memory = p.ok() ? "" : run.memory_failure_line(job.log);
  if (!no_memory.empty()) {  // it could not even start under the limit: out of memory, each one
    status = "out_of_memory";
    message = fmt::format("could not start under the memory limit of {}: {}",
                          human_bytes(double(run.opt.memory_limit)), no_memory);
    for (const Selected& s : run.selected)
      if (s.names.count(b) && !records[b].count(s.names.at(b)))
        records[b][s.names.at(b)] = Json::object(
            {{"name", s.names.at(b)}, {"status", "out_of_memory"}, {"message", message}});
  } else if (!p.ok()) {
    status = "failed", message = p.failure() + " (see " + job.log + ")";
    died[b] = "its check process " + message;
    if (p.exit_code == 2) {  // a flag it refused: one line, as for the runner's own
      if (one_at_a_time) fmt::print("\n");
      const std::vector<std::string> lines = fields(read_file(run.folder.dir() / job.log), '\n');
      run.refuse(fmt::format("{} refused its flags: {}", b, lines.size() > 1 ? lines[1] : "?"));
    }
  }
  if (!one_at_a_time) fmt::print("check {:<11} ", b);
  fmt::print("{} of {} instances reported in {:.1f} s{}{}\n", records[b].size() - job.decided,
             job.count, p.wall_seconds, p.ok() ? "" : "; " + message,
             job.decided ? fmt::format(" ({} not run)", job.decided) : "");
  std::fflush(stdout);
  run.add_process(RunState::process_json(b, "check", "", job.file, job.log, status, message, p));
}

// At most --jobs alive, started in --backends order; each reported as it ends. False if the run
// was interrupted.
bool run_checks(RunState& run, const std::vector<CheckJob>& jobs, Records& records,
                std::map<std::string, std::string>& died) {
  const bool one_at_a_time = run.opt.jobs == 1;  // a line says which backend is being checked
  std::vector<std::pair<const CheckJob*, std::unique_ptr<Child>>> alive;
  size_t next = 0;
  while (next < jobs.size() || !alive.empty()) {
    while (next < jobs.size() && alive.size() < size_t(run.opt.jobs) && !g_interrupted) {
      const CheckJob& job = jobs[next++];
      run.note_other_benchmarks();  // its warning before the line below, never inside it
      if (one_at_a_time) fmt::print("check {:<11} ", job.key()), std::fflush(stdout);
      alive.emplace_back(&job, std::make_unique<Child>(
                                   job.argv, (run.folder.dir() / job.log).string(), run.opt.timeout,
                                   run.child_env(job.backend), run.memory_limit_of(job.backend)));
    }
    if (g_interrupted && alive.empty()) return false;
    bool any = false;
    for (size_t i = 0; i < alive.size(); i++) {
      if (!alive[i].second->ended()) continue;
      const auto [job, child] = std::move(alive[i]);
      alive.erase(alive.begin() + i--);
      any = true;
      const ProcessResult p = child->finish();
      if (p.interrupted) return false;
      check_ended(run, *job, p, records, died, one_at_a_time);
    }
    if (!any) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

Json verdict_json(const std::string& instance, const Verdict& v) {
  return Json::object({{"instance", instance},
                       {"backend", v.backend},
                       {"status", v.status},
                       {"message", v.message},
                       {"is_reference", v.is_reference},
                       {"reference", v.reference},
                       {"confirmed_by", v.confirmed_by},
                       {"max_rel_diff", v.max_rel_diff},
                       {"at", v.worst_at},
                       {"tolerance", v.tolerance}});
}

// Per backend: how many agreed, the closest to its tolerance, and every instance not ok.
struct CheckTally {
  std::map<std::string, std::vector<std::string>> problems;
  std::map<std::string, std::pair<Verdict, std::string>> closest;  // nearest its tolerance, where
  std::map<std::string, int> ok, unverified;
  void add(const std::string& instance, const Verdict& v) {
    if (v.status == "unverified") {
      unverified[v.backend]++;
    } else if (v.status == "ok") {
      ok[v.backend]++;
      auto& [c, at] = closest[v.backend];
      if (!v.is_reference &&
          (c.worst_at.empty() || v.max_rel_diff / v.tolerance > c.max_rel_diff / c.tolerance))
        c = v, at = instance;
    } else if (v.status != "skipped") {
      problems[v.backend].push_back(fmt::format("{}: {}: {}", instance, v.status, v.message));
    }
  }
  bool print(const std::vector<std::string>& backends) {
    bool all_agree = true;
    for (const std::string& b : backends) {
      const auto& [c, at] = closest[b];
      std::string line = fmt::format("check {:<11} {} instances agree", b, ok[b]);
      if (const char* why = spec_of(b).not_judged)
        line = fmt::format("check {:<11} not judged: {}", b, why);
      else if (unverified[b])
        line += fmt::format("; {} unverified (nothing to compare with)", unverified[b]);
      if (!c.worst_at.empty())
        line += fmt::format("; closest to its tolerance: {:.2e} (tolerance {:.3g}) vs {} at {} {}",
                            c.max_rel_diff, c.tolerance, c.reference, at, c.worst_at);
      fmt::print("{}", wrapped(line + (problems[b].empty()
                                           ? ""
                                           : fmt::format("; {} NOT OK:", problems[b].size())),
                               6));
      for (const std::string& p : problems[b]) fmt::print("      {}\n", p);
      all_agree &= problems[b].empty();
    }
    return all_agree;
  }
};

// The judge over every instance; the verdicts, check steps and losses kept for the next phases.
bool judge_all(RunState& run, Records& records, std::map<std::string, std::string>& died) {
  Json results = Json::array();
  CheckTally tally;
  for (const Selected& s : run.selected) {
    std::vector<BackendRecord> in;
    std::vector<bool> bf16;  // judged apart (judge.h)
    std::vector<Verdict> unjudged;
    for (const std::string& b : run.opt.backends) {
      if (!s.names.count(b)) continue;
      auto r = records[b].find(s.names.at(b));
      // A bound's numbers are not an answer; a bound that failed is judged failed as any row.
      if (const char* why = spec_of(b).not_judged;
          why && r != records[b].end() && JsonView(r->second)["status"].str_or("") == "ok") {
        Verdict v;
        v.backend = b, v.status = "unverified", v.message = why;
        unjudged.push_back(v);
        continue;
      }
      in.push_back({b, r == records[b].end() ? nullptr : &r->second,
                    died.count(b) ? died[b] + " before reporting it" : "not reported"});
      bf16.push_back(run.opt.bf16 || backend_in_bf16(b));
    }
    const std::string& ref = run.opt.backends.front();
    if (auto twin = records.find(kFloat32Twin); twin != records.end() && s.names.count(ref)) {
      auto r = twin->second.find(s.names.at(ref));
      in.insert(in.begin(), {kFloat32Twin, r == twin->second.end() ? nullptr : &r->second,
                             died.count(kFloat32Twin) ? died[kFloat32Twin] + " before reporting it"
                                                      : "not reported"});
      bf16.insert(bf16.begin(), false);
    }
    // A study may train longer in its check (amp: 200 steps, its loss curves); the judge compares
    // the workload's own first steps, as every run does: further on, right backends drift apart
    // (by step 200 in float32, 1.2% on mini_gpt_wide 32, 6.8% on char_rnn_wide 100).
    const int judged_steps = s.workload->check_steps_at(s.size);
    std::deque<Json> first_steps;
    for (BackendRecord& r : in)
      if (s.workload->model && r.record && run.check_steps(s) > judged_steps &&
          JsonView(*r.record)["losses"].size() == size_t(run.check_steps(s))) {
        first_steps.push_back(*r.record);
        Json losses = Json::array();
        for (JsonView l : JsonView(*r.record)["losses"].elements())
          if (losses.size() < size_t(judged_steps)) losses.push_back(l.json());
        first_steps.back()["losses"] = std::move(losses);
        r.record = &first_steps.back();
      }
    PlainAnswer plain;  // scalar graphs: the answer without autodiff
    const bool has_plain = plain_answer(*s.workload, s.size, &plain);
    WorkloadInfo checked = *s.workload;  // with the check steps of this size
    checked.check_steps = judged_steps;
    std::vector<Verdict> verdicts = judge_instance(checked, in, bf16, has_plain ? &plain : nullptr);
    verdicts.insert(verdicts.end(), unjudged.begin(), unjudged.end());
    for (const Verdict& v : verdicts) {
      if (v.backend == kFloat32Twin) {  // no column: its verdict in check.json alone
        results.push_back(verdict_json(s.id, v));
        continue;
      }
      run.verdicts[s.id][v.backend] = v;
      tally.add(s.id, v);
      results.push_back(verdict_json(s.id, v));
      if (v.status != "ok" && v.status != "unverified") continue;
      const JsonView record = records[v.backend][s.names.at(v.backend)];
      run.step_seconds[s.id][v.backend] = record["step_seconds"].num_or(NAN);
      if (s.workload->model)
        for (JsonView l : record["losses"].elements())
          run.losses[s.id][v.backend].push_back(l.num_or(NAN));
    }
  }
  write_atomically(run.folder.dir() / "check.json",
                   dump_json(Json::object({{"results", results}}), 2, 2) + "\n");
  return tally.print(run.opt.backends);
}

}  // namespace

bool check_phase(RunState& run) {
  Records records;
  std::map<std::string, std::string> died;  // backend -> how its check ended
  const std::vector<CheckJob> jobs = plan_checks(run, records);
  if (!run_checks(run, jobs, records, died)) return false;
  return judge_all(run, records, died);
}

}  // namespace bp

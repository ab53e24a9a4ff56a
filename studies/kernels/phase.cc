// studies/kernels/phase.cc: the study kernels' own measurement, after the benchmarks: every
// matmul dialect kernel by kernel on the op shapes of the largest selected char_mlp, mlp_width and
// mini_gpt (whose small products are where LIBXSMM and the generated code compete), with the FMA
// peak (studies/kernels/kernel_rows.h, run in bench_compiled): kernels.json, a table
// in the summary (table.h), kernel_dialects.png. The rows' repetitions run in random order (Google
// Benchmark's random interleaving), so that the dialects of a shape are timed over the same
// minutes. A resumed run keeps a finished kernels.json.
#include "studies/kernels/phase.h"

#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

#include "harness/runner/process.h"
#include "harness/runner/run_state.h"

namespace bp {

void kernel_rows_phase(RunState& run) {
  std::map<std::string, const Selected*> largest;  // workload -> its largest selected instance
  for (const Selected& s : run.selected) {
    const std::string w(s.workload->name);
    if ((w == "char_mlp" || w == "mlp_width" || w == "mini_gpt") && s.names.count("compiled") &&
        (!largest.count(w) || largest[w]->size < s.size))
      largest[w] = &s;
  }
  const fs::path out = run.folder.dir() / "kernels.json";
  if (largest.empty() || (!run.opt.resume.empty() && fs::exists(out))) return;
  std::vector<std::string> argv = run.command("compiled", true);
  std::string which;
  for (const auto& [w, s] : largest) {
    argv.push_back(run.instance_arg(*s, "compiled"));
    which += (which.empty() ? "" : ", ") + s->id;
  }
  for (std::string a :
       {std::string("--kernel_rows"), std::string("--benchmark_enable_random_interleaving=true"),
        "--benchmark_out=" + (run.folder.dir() / "kernels.json.partial").string(),
        std::string("--benchmark_out_format=json"),
        fmt::format("--benchmark_repetitions={}", run.opt.repetitions),
        fmt::format("--benchmark_min_time={}", run.opt.min_time)})
    argv.push_back(a);
  fmt::print("\nkernels: every matmul dialect on the op shapes of {}, and the FMA peak ... ",
             which);
  std::fflush(stdout);
  const std::string log = "logs/kernels.log";
  const ProcessResult p = run_process(argv, (run.folder.dir() / log).string(), run.opt.timeout,
                                      run.child_env("compiled"), run.opt.memory_limit);
  if (p.interrupted) return;
  std::string status = "ok", message;
  if (p.ok()) {
    fs::rename(run.folder.dir() / "kernels.json.partial", out);
    fmt::print("{:.1f} s\n", p.wall_seconds);
  } else {
    status = "failed", message = p.failure() + " (see " + log + ")";
    fmt::print("failed: {}\n", message);
    run.failures++;
  }
  run.add_process(
      RunState::process_json("compiled", "kernels", "", "kernels.json", log, status, message, p));
}

}  // namespace bp

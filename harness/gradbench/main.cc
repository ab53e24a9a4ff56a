// harness/gradbench/main.cc: bp_gradbench, our engine as a GradBench tool (harness/gradbench/).
//
//   bp_gradbench [--backend B]                           GradBench's protocol on stdin/stdout
//   bp_gradbench [--backend B] [--module M] FILE FUNCTION
//       GradBench's C++ tools' convention: the input in FILE, the output JSON on the first line
//       of stdout, then one {"name", "nanoseconds"} line per timing; run as `bin/<module>` (a
//       link named after the module) it needs no --module
//   bp_gradbench --write-input WORKLOAD SIZE             our seeded input (bench_run's) as JSON
// B: scalar (default: our engine's eager tape) or compiled (its compiled scalar program), on every
// eval; engine (our eager tensor graph), compiled_tensor or libtorch on the tensor forms of lstm
// and gmm. Built twice: bp_gradbench links no libtorch and runs bp_gradbench_libtorch, beside it,
// for --backend libtorch (one thread, as GradBench times tools).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "harness/common/text.h"
#include "harness/gradbench/tool.h"
#include "workloads/registry.h"

namespace {

constexpr const char* kUsage =
    "usage: bp_gradbench [--backend scalar|compiled|engine|compiled_tensor|libtorch]\n"
    "                    [[--module M] FILE FUNCTION]\n"
    "       bp_gradbench --write-input WORKLOAD SIZE\n"
    "       bp_gradbench --help\n";

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "bp_gradbench: %s\n%s", why.c_str(), kUsage);
  std::exit(2);
}

void help() {
  std::printf(
      "bp_gradbench: our engine as a GradBench tool (docs/gradbench.md).\n%s\n"
      "With no FILE it speaks GradBench's protocol: one JSON message a line on stdin, one reply a\n"
      "line on stdout (start, define, evaluate, analysis). With FILE FUNCTION it evaluates one\n"
      "input as GradBench's C++ tools do; run as bin/<module> it needs no --module.\n"
      "  --backend  scalar (default) or compiled on every module; engine, compiled_tensor or\n"
      "             libtorch on the tensor forms of lstm and gmm\n"
      "  --module   %s\n"
      "Sizes are bounded: past 2^27 operations on a tape (2^33 without), 10^5 runs or 600 s,\n"
      "an evaluation is an error reply.\n",
      kUsage, std::string(bp::gradbench::kModules).c_str());
}

int write_input(const std::string& workload, const std::string& size_text) {
  const std::optional<int64_t> size = bp::parse_whole(size_text);
  const bp::WorkloadInfo* w = bp::find_workload(workload);
  bool written = false;
  if (w && size && bp::size_error(*w, *size).empty())
    bp::for_each_workload([&]<class W>() {
      if constexpr (requires { bp::gradbench::input_json(W::input(1)); })
        if (W::name == workload) {
          std::cout << bp::gradbench::input_json(W::input(*size)).dump() << '\n';
          written = true;
        }
    });
  if (written) return 0;
  usage("--write-input " + workload + " " + size_text +
        ": expected a GradBench eval of the registry (lse, llsq, lstm, gmm_d2, gmm_d10) and a "
        "size it accepts" +
        (w && size ? " (" + bp::size_error(*w, *size) + ")" : ""));
}

// GradBench's C++ convention: one evaluation of FILE's input, as its cpp/gradbench/main.hpp does.
int run_file(const std::string& backend, const std::string& module, const std::string& file,
             const std::string& function) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) usage(file + ": a directory, not an input file");
  std::ifstream in(file);
  if (!in) usage(file + ": cannot open it");
  std::stringstream text;
  text << in.rdbuf();
  bp::gradbench::Session session(backend);
  const bp::Json define = bp::Json::object_of({{"id", 0}, {"kind", "define"}, {"module", module}});
  if (const std::string def = session.reply(define.dump());
      bp::parse_json(def)["success"].boolean == false)
    usage(bp::parse_json(def)["error"].str_or("cannot define " + module));
  bp::Json input;
  try {
    input = bp::parse_json(text.str());
  } catch (const std::exception& e) {
    usage(file + ": " + e.what());
  }
  bp::Json message = bp::Json::object_of(
      {{"id", 1}, {"kind", "evaluate"}, {"module", module}, {"function", function}});
  message.set("input", std::move(input));
  const bp::Json response = bp::parse_json(session.reply(message.dump()));
  if (!response["success"].boolean) {
    std::fprintf(stderr, "bp_gradbench: %s\n", response["error"].str_or("failed").c_str());
    return 1;
  }
  std::cout << response["output"].dump() << '\n';
  for (const bp::Json& t : response["timings"].array) std::cout << t.dump() << '\n';
  return 0;
}

#if !defined(BP_GRADBENCH_LIBTORCH)
// --backend libtorch from the binary without libtorch: the same arguments to its sibling.
[[noreturn]] void run_libtorch_binary(char** argv) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string path = n > 0 ? std::string(self, size_t(n)) : std::string(argv[0]);
  path = path.substr(0, path.rfind('/') + 1) + "bp_gradbench_libtorch";
  execv(path.c_str(), argv);  // argv[0] unchanged: run as bin/<module>, it names the module
  usage("--backend libtorch: cannot run " + path + ": " + std::strerror(errno));
}
#endif

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "scalar", module;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; i++) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help();
      return 0;
    } else if (arg == "--write-input") {
      if (i + 3 != argc) usage("--write-input takes WORKLOAD SIZE, and nothing after them");
      return write_input(argv[i + 1], argv[i + 2]);
    } else if (arg.rfind("--backend=", 0) == 0 || arg == "--backend") {
      if (arg == "--backend" && i + 1 >= argc) usage("--backend takes a value");
      backend = arg == "--backend" ? argv[++i] : std::string(arg.substr(10));
    } else if (arg.rfind("--module=", 0) == 0 || arg == "--module") {
      if (arg == "--module" && i + 1 >= argc) usage("--module takes a value");
      module = arg == "--module" ? argv[++i] : std::string(arg.substr(9));
    } else if (arg.rfind("--", 0) == 0) {
      usage(std::string(arg) + ": unknown flag");
    } else {
      positional.emplace_back(arg);
    }
  }
  if (std::string why = bp::gradbench::backend_lacks(backend);
      !why.empty() && why.rfind("unknown", 0) == 0)
    usage("--backend " + why);
#if defined(BP_GRADBENCH_LIBTORCH)
  torch::set_num_threads(1);
#else
  if (backend == "libtorch") run_libtorch_binary(argv);
#endif
  if (!positional.empty()) {
    if (positional.size() != 2) usage("expected FILE FUNCTION");
    if (module.empty()) {  // run as bin/<module>
      const std::string_view self = argv[0];
      module = std::string(self.substr(self.rfind('/') + 1));
      if (!bp::gradbench::with_module(module, []<class W>() {}))
        usage("name the module (--module M, one of " + std::string(bp::gradbench::kModules) +
              ") or run as bin/<module>");
    }
    return run_file(backend, module, positional[0], positional[1]);
  }
  bp::gradbench::Session session(backend);
  std::ios::sync_with_stdio(false);
  for (std::string line; std::getline(std::cin, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // a blank line
    std::cout << session.reply(line) << std::endl;  // flushed: the eval waits for it
  }
  return 0;
}

// harness/gradbench/cli.h: bp_gradbench's command line (its main() and backends are
// apps/bp_gradbench.cc; the protocol is harness/gradbench/tool.h).
//
//   bp_gradbench [--backend B] [--precision P]           GradBench's protocol on stdin/stdout
//   bp_gradbench [--backend B] [--precision P] [--module M] FILE FUNCTION
//       GradBench's C++ tools' convention: the input in FILE, the output JSON on the first line
//       of stdout, then one {"name", "nanoseconds"} line per timing; run as `bin/<module>` (a
//       link named after the module) it needs no --module
//   bp_gradbench --write-input WORKLOAD SIZE             our seeded input (bench_run's) as JSON
//   bp_gradbench --help
// B: one of the program's Backends (tool.h says what such a policy holds). A program may hand a
// backend to another binary (`elsewhere`: bp_gradbench execs bp_gradbench_libtorch for
// --backend libtorch, so that it links no libtorch itself).
#pragma once

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

namespace bp::gradbench {

inline constexpr const char* kToolUsage =
    "usage: bp_gradbench [--backend scalar|compiled|engine|compiled_tensor|libtorch]\n"
    "                    [--precision float64|float32] [[--module M] FILE FUNCTION]\n"
    "       bp_gradbench --write-input WORKLOAD SIZE\n"
    "       bp_gradbench --help\n";

[[noreturn]] inline void usage(const std::string& why) {
  std::fprintf(stderr, "bp_gradbench: %s\n%s", why.c_str(), kToolUsage);
  std::exit(2);
}

inline void help() {
  std::printf(
      "bp_gradbench: our engine as a GradBench tool (docs/gradbench.md).\n%s\n"
      "With no FILE it speaks GradBench's protocol: one JSON message a line on stdin, one reply a\n"
      "line on stdout (start, define, evaluate, analysis). With FILE FUNCTION it evaluates one\n"
      "input as GradBench's C++ tools do; run as bin/<module> it needs no --module.\n"
      "  --backend    scalar (default) or compiled on every module; engine, compiled_tensor or\n"
      "               libtorch on the tensor forms of lstm and gmm\n"
      "  --precision  the tensor forms' numbers: float64 (default, as GradBench's own tools) or\n"
      "               float32 (as the bench's model rows); the scalar forms are double\n"
      "  --module     %s\n"
      "Sizes are bounded: past 2^27 operations on a tape (2^33 without), 10^5 runs or 600 s,\n"
      "an evaluation is an error reply.\n",
      kToolUsage, std::string(kModules).c_str());
}

inline int write_input(const std::string& workload, const std::string& size_text) {
  const std::optional<int64_t> size = parse_whole(size_text);
  const WorkloadInfo* w = find_workload(workload);
  bool written = false;
  std::string evals;  // the registry's, as the message names them
  for_each_workload([&]<class W>() {
    if constexpr (requires { input_json(W::input(1)); }) {
      evals += (evals.empty() ? "" : ", ") + std::string(W::name);
      if (W::name == workload && w && size && size_error(*w, *size).empty()) {
        std::cout << dump_json(input_json(W::input(*size))) << '\n';
        written = true;
      }
    }
  });
  if (written) return 0;
  usage("--write-input " + workload + " " + size_text + ": expected a GradBench eval of the " +
        "registry (" + evals + ") and a size it accepts" +
        (w && size ? " (" + size_error(*w, *size) + ")" : ""));
}

// GradBench's C++ convention: one evaluation of FILE's input, as its cpp/gradbench/main.hpp does.
template <class Backends>
int run_file(const std::string& backend, Precision precision, const std::string& module,
             const std::string& file, const std::string& function) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) usage(file + ": a directory, not an input file");
  std::ifstream in(file);
  if (!in) usage(file + ": cannot open it");
  std::stringstream text;
  text << in.rdbuf();
  Session<Backends> session(backend, precision);
  const Json define = Json::object({{"id", 0}, {"kind", "define"}, {"module", module}});
  const Json defined = parse_json(session.reply(dump_json(define)));
  if (!JsonView(defined)["success"].bool_or(false))
    usage(JsonView(defined)["error"].str_or("cannot define " + module));
  Json input;
  try {
    input = parse_json(text.str());
  } catch (const std::exception& e) {
    usage(file + ": " + e.what());
  }
  Json message =
      Json::object({{"id", 1}, {"kind", "evaluate"}, {"module", module}, {"function", function}});
  message["input"] = std::move(input);
  const Json response_json = parse_json(session.reply(dump_json(message)));
  const JsonView response = response_json;
  if (!response["success"].bool_or(false)) {
    std::fprintf(stderr, "bp_gradbench: %s\n", response["error"].str_or("failed").c_str());
    return 1;
  }
  std::cout << dump_json(response["output"]) << '\n';
  for (JsonView t : response["timings"].elements()) std::cout << dump_json(t) << '\n';
  return 0;
}

// The whole command line. `elsewhere(backend)`: true if another binary runs it (then it is
// exec'd with the same arguments, `hand_over(argv)`, which does not return).
template <class Backends>
int tool_main(int argc, char** argv, bool (*elsewhere)(std::string_view) = nullptr,
              void (*hand_over)(char** argv) = nullptr) {
  std::string backend = "scalar", module;
  Precision precision = Precision::float64;
  bool precision_given = false;
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
    } else if (arg.rfind("--precision=", 0) == 0 || arg == "--precision") {
      if (arg == "--precision" && i + 1 >= argc) usage("--precision takes a value");
      const std::string text = arg == "--precision" ? argv[++i] : std::string(arg.substr(12));
      const std::optional<Precision> p = parse_precision(text);
      if (!p)
        usage("--precision " + text + ": valid: " + std::string(kPrecisions) +
              (text == "bf16" || text == "fp16" || text == "fp8"
                   ? " (GradBench's evals are checked in float64 and float32; mixed precision is "
                     "for the bench's model rows: make bench PRECISION=bf16)"
                   : ""));
      precision = *p, precision_given = true;
    } else if (arg.rfind("--module=", 0) == 0 || arg == "--module") {
      if (arg == "--module" && i + 1 >= argc) usage("--module takes a value");
      module = arg == "--module" ? argv[++i] : std::string(arg.substr(9));
    } else if (arg.rfind("--", 0) == 0) {
      usage(std::string(arg) + ": unknown flag");
    } else {
      positional.emplace_back(arg);
    }
  }
  if (std::string why = backend_lacks<Backends>(backend);
      !why.empty() && why.rfind("unknown", 0) == 0)
    usage("--backend " + why);
  if (precision_given && precision == Precision::float32 && Backends::known(backend) &&
      !Backends::runs_tensor_forms(backend))
    usage("--precision float32: --backend " + backend +
          " computes its scalar graph in double only; the precision is the tensor forms' "
          "(engine, compiled_tensor, libtorch)");
  if (elsewhere && elsewhere(backend)) hand_over(argv);
  if (!positional.empty()) {
    if (positional.size() != 2) usage("expected FILE FUNCTION");
    if (module.empty()) {  // run as bin/<module>
      const std::string_view self = argv[0];
      module = std::string(self.substr(self.rfind('/') + 1));
      if (!with_module(module, []<class W>() {}))
        usage("name the module (--module M, one of " + std::string(kModules) +
              ") or run as bin/<module>");
    }
    return run_file<Backends>(backend, precision, module, positional[0], positional[1]);
  }
  Session<Backends> session(backend, precision);
  std::ios::sync_with_stdio(false);
  for (std::string line; std::getline(std::cin, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // a blank line
    std::cout << session.reply(line) << std::endl;  // flushed: the eval waits for it
    if (!std::cout) {  // a full disk, a closed or unwritable stdout: the eval would wait forever
      std::fprintf(stderr, "error: stdout: cannot write the reply to message %s: %s\n",
                   line.substr(0, 40).c_str(), std::strerror(errno ? errno : EIO));
      return 1;
    }
  }
  if (std::cin.bad()) {  // getline could not hold the line (memory) or read it (stdin failed)
    std::fprintf(stderr,
                 "error: stdin: a message could not be read (a line larger than this process's "
                 "memory, or a read error): %s; the session ends\n",
                 std::strerror(errno ? errno : ENOMEM));
    return 1;
  }
  return 0;
}

}  // namespace bp::gradbench

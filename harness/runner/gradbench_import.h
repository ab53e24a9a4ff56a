// harness/runner/gradbench_import.h: `bench_run import-gradbench`, GradBench's tools beside ours.
//
// GradBench's intermediary logs a session as JSON lines (CONTRIBUTING.md upstream, Protocol):
// {"elapsed": {...}, "message": {...}} from the eval and {"elapsed": {...}, "response": {...}}
// from the tool. Each evaluate response holds one "evaluate" timing per run of the function, so
// a log has what a median and its interval need. An evaluate of an eval's gradient becomes a cell
// of the matching instance of our registry (workloads/gradbench.h: lse by its elements, llsq at
// m = 128 by its points, lstm at 2 layers by its characters, gmm at d = 2 or 10, n = 1000, m = 0,
// gamma = 1 by its k), for a backend named after the tool (`gradbench_<tool>`). GradBench's own
// judgement (its analysis message) decides the cell's status: valid is ok, invalid is wrong with
// GradBench's reason. What does not match (the primal, other sizes) is listed, never dropped in
// silence. With --into RUN the cells join that run's summary as a new run folder, whose summary,
// figures and report show GradBench's tools beside our backends.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "harness/common/files.h"
#include "harness/common/json.h"
#include "harness/common/names.h"
#include "harness/runner/summary.h"
#include "workloads/registry.h"

namespace bp {

namespace fs = std::filesystem;

struct ImportedCell {
  std::string backend, instance;
  const WorkloadInfo* workload = nullptr;
  int64_t size = 0;
  Cell cell;
};
struct GradbenchImport {
  std::vector<ImportedCell> cells;
  std::vector<std::string> left_out;            // one line each: what and why
  std::map<std::string, std::string> versions;  // backend -> where it came from
  std::map<std::string, std::string> tool_of;   // backend -> the tool's own name
};

// Our instance for an evaluate of `module`'s `function` on `input`, or "" with *why.
inline std::string gradbench_instance(const std::string& module, const std::string& function,
                                      JsonView input, const WorkloadInfo** w, int64_t* size,
                                      std::string* why) {
  auto count = [](JsonView v) { return int64_t(v.size()); };
  // A size is a whole number from 0 to 2^53: 1e300 converted as it stands was a negative size.
  auto whole = [](JsonView v) {
    const double x = v.num_or(NAN);
    return x >= 0 && x <= 9007199254740992.0 && x == std::floor(x) ? int64_t(x) : int64_t(-1);
  };
  const bool gradient = function == "gradient" || function == "jacobian";
  std::string name;
  if (!gradient) {
    *why = "its " + function + " (bench_run times gradients)";
  } else if (module == "lse") {
    name = "lse", *size = count(input["x"]);
  } else if (module == "llsq") {
    if (count(input["x"]) != Llsq::kCoefficients)
      *why = fmt::format("m = {} (our llsq has {})", count(input["x"]), Llsq::kCoefficients);
    else if ((*size = whole(input["n"])) < 0)
      *why =
          fmt::format("n = {} is no size (a whole number from 0 to 2^53)", dump_json(input["n"]));
    else
      name = "llsq";
  } else if (module == "lstm") {
    if (count(input["main_params"]) != 2 * Lstm::kLayers)
      *why = fmt::format("{} layers (our lstm has {})", count(input["main_params"]) / 2,
                         Lstm::kLayers);
    else
      name = "lstm", *size = count(input["sequence"]);
  } else if (module == "gmm") {
    const int64_t d = whole(input["d"]);
    if ((d != 2 && d != 10) || input["n"].num_or(0) != GmmD2::kPoints ||
        input["m"].num_or(-1) != 0 || input["gamma"].num_or(0) != 1.0)
      *why = fmt::format(
          "d = {}, n = {}, m = {}, gamma = {} (ours: d = 2 or 10, n = 1000, m = 0, "
          "gamma = 1)",
          d, dump_json(input["n"]), dump_json(input["m"]), dump_json(input["gamma"]));
    else if ((*size = whole(input["k"])) < 0)
      *why =
          fmt::format("k = {} is no size (a whole number from 0 to 2^53)", dump_json(input["k"]));
    else
      name = d == 2 ? "gmm_d2" : "gmm_d10";
  } else {
    *why = "module " + module + " (not among our workloads)";
  }
  if (name.empty()) return "";
  *w = find_workload(name);
  if (std::string e = size_error(**w, *size); !e.empty()) return *why = e, "";
  return instance_id(**w, *size);
}

inline std::string gradbench_backend_name(const std::string& tool) {
  std::string out = "gradbench_";
  for (char c : tool) out += (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ? c : '_';
  return out;
}

// The seconds of each "evaluate" timing, or what is wrong with them: GradBench writes a whole
// number of nanoseconds, at least 0; a string ("NaN"), null, a missing value, a negative or a
// duration past a day (1e300, or 1e999 read as infinity) is not one, and its cell is failed
// rather than a time.
inline std::string evaluate_seconds(JsonView timings, std::vector<double>* seconds) {
  constexpr double kDayNanoseconds = 86400e9;
  size_t index = 0;
  for (JsonView t : timings.elements()) {
    index++;
    if (t["name"].str_or("") != "evaluate") continue;
    const JsonView ns = t["nanoseconds"];
    const double n = ns.num_or(NAN);
    if (!(n >= 0) || n > kDayNanoseconds || n != std::floor(n))
      return fmt::format("timing {} is {}, not a whole number of nanoseconds from 0 to a day",
                         index, ns.is_null() ? "missing or null" : dump_json(ns));
    seconds->push_back(n / 1e9);
  }
  if (seconds->empty()) return "response has no evaluate timing";
  return "";
}

// Reads one log. A line that is not JSON, or a log with no start, is an error naming the line.
inline void import_gradbench_log(const fs::path& path, GradbenchImport* out) {
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw std::runtime_error(path.string() + ": a directory, not a GradBench log");
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path.string() + ": cannot open it");
  struct Evaluate {
    std::string module, function, description, instance;
    const WorkloadInfo* workload = nullptr;
    int64_t size = 0;
    Json response;  // its response, when it came
    int line = 0;
  };
  std::map<double, Evaluate> evaluates;  // by message id
  std::map<double, Json> analyses;       // by the id of the evaluate it judged
  std::string tool = path.stem().string();
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    line_number++;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json line_json;
    try {
      line_json = parse_json(line);
    } catch (const std::exception& e) {
      throw std::runtime_error(fmt::format("{}:{}: not a GradBench log line ({})", path.string(),
                                           line_number, e.what()));
    }
    const JsonView j = line_json;
    const JsonView m = j["message"];
    const JsonView r = j["response"];
    if (m.is_object() && m["kind"].str_or("") == "evaluate") {
      Evaluate e{m["module"].str_or(""),
                 m["function"].str_or(""),
                 m["description"].str_or(""),
                 "",
                 nullptr,
                 0,
                 Json(),
                 line_number};
      std::string why;
      e.instance = gradbench_instance(e.module, e.function, m["input"], &e.workload, &e.size, &why);
      if (e.instance.empty())
        out->left_out.push_back(fmt::format("{}:{}: {} {} {}: {}", path.filename().string(),
                                            line_number, e.module, e.function, e.description, why));
      evaluates[m["id"].num_or(-1)] = std::move(e);
    } else if (m.is_object() && m["kind"].str_or("") == "analysis") {
      analyses[m["of"].num_or(-1)] = m.json();
    } else if (r.is_object()) {
      if (!r["tool"].is_null()) tool = r["tool"].str_or(tool);
      if (auto it = evaluates.find(r["id"].num_or(-1)); it != evaluates.end())
        it->second.response = r.json();
    }
  }
  if (evaluates.empty()) {  // said, not passed over as nothing
    out->left_out.push_back(path.filename().string() +
                            (line_number == 0 ? ": empty" : ": no evaluate message in it"));
    return;
  }
  const std::string backend = gradbench_backend_name(tool);
  if (auto [it, fresh] = out->tool_of.emplace(backend, tool); !fresh && it->second != tool)
    throw std::runtime_error(
        fmt::format("{}: the tools {} and {} would both be the backend {} (names differ only in "
                    "punctuation or case); rename one in its log",
                    path.string(), it->second, tool, backend));
  out->versions[backend] =
      fmt::format("GradBench tool {} (imported from {})", tool, path.filename().string());
  for (auto& [id, e] : evaluates) {
    if (e.instance.empty()) continue;
    const JsonView response = e.response;
    ImportedCell c{backend, e.instance, e.workload, e.size, {}};
    Cell& cell = c.cell;
    if (e.response.is_null()) {
      cell.status = "failed", cell.message = "the log has no response to it";
    } else if (!response["success"].bool_or(false)) {
      cell.status = "failed";
      cell.message = "GradBench: " + response["error"].str_or("the tool failed");
    } else if (std::string bad = evaluate_seconds(response["timings"], &cell.repetition_seconds);
               !bad.empty()) {
      cell.status = "failed", cell.message = "the log's " + bad;
      cell.repetition_seconds.clear();
    } else {
      cell.median_seconds = median_of(cell.repetition_seconds);
      cell.interval = median_interval(cell.repetition_seconds);
      cell.status = "ok";
      const auto a = analyses.find(id);
      cell.verified = a != analyses.end();
      if (a != analyses.end()) {
        const JsonView analysis = a->second;
        if (!analysis["valid"].bool_or(false))
          cell.status = "wrong",
          cell.message = "GradBench judged it invalid: " + analysis["error"].str_or("(no reason)");
      }
    }
    cell.file = path.filename().string();
    out->cells.push_back(std::move(c));
  }
}

// summary.json back into a Summary, so that an import can add cells and write it again. What is
// not a summary of bench_run (`{}`, `[]`, rows that are not a list) is a runtime_error.
inline Summary summary_from_json(JsonView j) {
  if (!j.is_object() || !j["run_id"].is_string() || !j["rows"].is_array() ||
      !j["backends"].is_array())
    throw std::runtime_error("not a summary of bench_run (no run_id, backends and rows)");
  Summary s;
  s.run_id = j["run_id"].str_or(""), s.study = j["study"].str_or("main");
  s.reference = j["reference"].str_or("");
  for (JsonView b : j["backends"].elements()) s.backends.push_back(b.str_or(""));
  for (const auto& [b, n] : j["threads"].members()) s.threads[b] = int(n.num_or(1));
  for (const std::string& b : s.backends)
    if (!s.threads.count(b))
      throw std::runtime_error("not a summary of bench_run (no thread count for backend " + b +
                               ")");
  s.machine = j["machine"].json(), s.options = j["options"].json();
  s.contexts = j["backend_contexts"].json();
  s.kernels = j["kernels"].json(), s.intervals = j["intervals"].json();
  for (JsonView row : j["rows"].elements()) {
    const WorkloadInfo* w = find_workload(row["workload"].str_or(""));
    if (!w) continue;  // a workload this build does not have
    SummaryRow r{row["instance"].str_or(""), w, int64_t(row["size"].num_or(0)), {}};
    for (const auto& [b, c] : row["backends"].members()) {
      Cell& cell = r.cells[b];
      cell.status = c["status"].str_or("failed"), cell.message = c["message"].str_or("");
      cell.verified = !c["verified"].is_boolean() || c["verified"].bool_or(false);
      cell.median_seconds = c["median_seconds"].num_or(NAN);
      const JsonView iv = c["median_interval_seconds"];
      cell.interval = {iv.size() == 2 ? iv[0].num_or(NAN) : NAN,
                       iv.size() == 2 ? iv[1].num_or(NAN) : NAN,
                       c["median_interval_level"].num_or(NAN)};
      for (JsonView t : c["repetition_seconds"].elements())
        cell.repetition_seconds.push_back(t.num_or(NAN));
      cell.max_rss_bytes = c["max_rss_bytes"].num_or(NAN);
      cell.peak_rss_bytes = c["peak_rss_bytes"].num_or(NAN);
      cell.items_per_second = c["items_per_second"].num_or(NAN);
      cell.file = c["file"].str_or("");
      for (JsonView l : c["check_losses"].elements()) cell.check_losses.push_back(l.num_or(NAN));
      for (const auto& [name, v] : c["counters"].members()) cell.counters[name] = v.num_or(NAN);
    }
    s.rows.push_back(std::move(r));
  }
  return s;
}

// Adds the imported cells to `s` (a row of its own for an instance the run does not have, in
// registry order), each tool a backend after the run's own.
inline void merge_import(const GradbenchImport& imported, Summary* s) {
  for (const ImportedCell& c : imported.cells) {
    if (std::find(s->backends.begin(), s->backends.end(), c.backend) == s->backends.end()) {
      s->backends.push_back(c.backend);
      s->threads[c.backend] = 1;  // GradBench's nightly runs are single-threaded
      s->contexts[c.backend] = Json::object({{"backend_version", imported.versions.at(c.backend)},
                                             {"threads", "as the GradBench run had them"}});
    }
    auto row = std::find_if(s->rows.begin(), s->rows.end(),
                            [&](const SummaryRow& r) { return r.instance == c.instance; });
    if (row == s->rows.end()) {
      s->rows.push_back({c.instance, c.workload, c.size, {}});
      row = s->rows.end() - 1;
    }
    row->cells[c.backend] = c.cell;
  }
  if (s->reference.empty() && !s->backends.empty()) s->reference = s->backends.front();
  auto order = [](const SummaryRow& r) {
    return std::pair(size_t(r.workload - kWorkloads.data()), r.size);
  };
  std::stable_sort(s->rows.begin(), s->rows.end(),
                   [&](const SummaryRow& a, const SummaryRow& b) { return order(a) < order(b); });
}

// bench_run import-gradbench LOG... [--into RUN] [--out DIR] (harness/runner/gradbench_import.cc)
int import_gradbench_main(const std::vector<std::string>& args);

}  // namespace bp

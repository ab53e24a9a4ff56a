// harness/runner/summary_text.h: the tables a person reads at the end of a run (summary.txt),
// every line within kSummaryColumns: per instance each backend's median time with its ratio to
// the reference (backends that do not fit go to a further block of columns), each process's peak
// RSS, where the reference loses, and the study's own table (harness/runner/studies.h).
//   Tests: harness/runner/results_test.cc (the width, the blocks), harness/tests/ on real runs.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "harness/runner/studies.h"
#include "harness/runner/summary.h"

namespace bp {

inline constexpr size_t kSummaryColumns = 120;

// A space `wrapped` never breaks at (between a number and its unit).
inline constexpr char kNoBreak = '\x01';
inline std::string unbroken(std::string text) {
  std::replace(text.begin(), text.end(), ' ', kNoBreak);
  return text;
}

// `text` as lines of at most kSummaryColumns, broken at spaces, continued with `indent`.
inline std::string wrapped(const std::string& text, size_t indent) {
  std::string out, line;
  for (const std::string& word : split(text, ' ')) {
    if (!line.empty() && line.size() + 1 + word.size() > kSummaryColumns) {
      out += line + "\n";
      line = std::string(indent, ' ');
    } else if (!line.empty() && line.find_first_not_of(' ') != std::string::npos) {
      line += ' ';
    }
    line += word;
  }
  out += line + "\n";
  std::replace(out.begin(), out.end(), kNoBreak, ' ');
  return out;
}

// Rows of cells as a table: the first column left-aligned, the others right-aligned, each as wide
// as the widest cell it holds, two spaces apart.
inline std::string aligned_table(const std::vector<std::vector<std::string>>& cells) {
  std::vector<size_t> width;
  for (const auto& line : cells)
    for (size_t i = 0; i < line.size(); i++) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], line[i].size());
    }
  std::string out;
  for (const auto& line : cells) {
    if (line.empty()) continue;
    out += fmt::format("{:<{}}", line[0], width[0]);
    for (size_t i = 1; i < line.size(); i++) out += fmt::format("  {:>{}}", line[i], width[i]);
    out += "\n";
  }
  return out;
}

// A cell's median with its marks: ~ a wide interval, ? unverified; or why there is none.
inline std::string time_text(const Cell& c) {
  if (c.status == "not_run") return "not run";
  if (c.status == "out_of_memory") return "out of mem";
  if (c.status != "ok") return c.status;
  return human_time(c.median_seconds) + (c.verified ? "" : "?") + (c.wide() ? "~" : "");
}
inline std::string memory_text(const Cell& c) {
  if (c.status == "out_of_memory") return "out of mem";
  if (c.status != "ok") return c.status == "not_run" ? "not run" : c.status;
  return human_mb(c.max_rss_bytes);
}

// The backends in blocks of columns that fit in kSummaryColumns after the instance column:
// with `reference_width`, each block starts with the reference (the time table). A column is as
// wide as its cells or its backend's name.
inline std::vector<std::vector<std::string>> column_blocks(const Summary& s, size_t first_width,
                                                           size_t reference_width,
                                                           size_t other_width) {
  std::vector<std::vector<std::string>> blocks;
  size_t used = kSummaryColumns;
  for (const std::string& b : s.backends) {
    if (reference_width && b == s.reference) continue;
    const size_t width = std::max(other_width, b.size() + 1);
    if (used + width > kSummaryColumns) {
      blocks.push_back({});
      used = first_width;
      if (reference_width) blocks.back().push_back(s.reference), used += reference_width;
    }
    blocks.back().push_back(b);
    used += width;
  }
  if (blocks.empty()) blocks.push_back({s.reference});
  return blocks;
}

// "N processes: bench_libtorch 31, pytorch_bench.py 12, ..." from "pid program" each (a loaded
// machine under make test showed some 80 process ids in one paragraph); one process: itself.
inline std::string others_counted(const std::vector<std::string>& others) {
  if (others.size() == 1) return others[0];
  std::map<std::string, int> count;
  for (const std::string& o : others) count[o.substr(o.find(' ') + 1)]++;
  std::vector<std::pair<int, std::string>> by_count;
  for (const auto& [program, n] : count) by_count.push_back({-n, program});
  std::sort(by_count.begin(), by_count.end());
  std::vector<std::string> parts;
  for (const auto& [n, program] : by_count) parts.push_back(fmt::format("{} {}", program, -n));
  return fmt::format("{} processes: {}", others.size(), fmt::join(parts, ", "));
}

inline std::string machine_lines(const Summary& s) {
  const JsonView env = JsonView(s.machine)["environment"];
  const std::string kernel = env["kernel"].str_or("?");  // its release: what comes before ' #'
  std::map<int, std::vector<std::string>> by_threads;
  for (const std::string& b : s.backends) by_threads[s.threads.at(b)].push_back(b);
  std::string threads;
  for (const auto& [n, list] : by_threads)
    threads += fmt::format("{}{} thread{}: {}", threads.empty() ? "" : "; ", n, n > 1 ? "s" : "",
                           fmt::join(list, ", "));
  // More threads than the CPUs the run could use: said where the thread counts are.
  const std::string affinity = env["cpu_affinity"].str_or("");
  const int cpus = affinity.empty() || affinity == "unknown"
                       ? 0
                       : int(std::count(affinity.begin(), affinity.end(), ',')) + 1;
  if (cpus > 0 && !by_threads.empty() && by_threads.rbegin()->first > cpus)
    threads += fmt::format(" (oversubscribed: {} threads on {} CPU{})", by_threads.rbegin()->first,
                           cpus, cpus == 1 ? "" : "s");
  if (const std::string isa = JsonView(s.options)["isa"].str_or(""); !isa.empty()) {
    const bool own = std::any_of(s.backends.begin(), s.backends.end(), [](const std::string& b) {
      return find_backend(b) && find_backend(b)->isa;  // the study isa's variants
    });
    threads += isa == "native" ? "; instruction sets: each library's own choice (--isa=native)"
                               : "; instruction sets: " + isa + " for every backend";
    if (own)
      threads += isa == "native" ? ", each _avx2 or _avx512 row at its own level"
                                 : " but the _avx2 and _avx512 rows, at their own";
  }
  if (JsonView(s.options)["precision"].str_or("fp32") == "bf16") {
    threads += "; precision bf16 (mixed: bf16 products, float32 weights and optimizer)";
    // Which bf16 path each backend takes on this processor (its context's bf16_products): a
    // widened or bf16-summing path is another computation, at another speed.
    std::map<std::string, std::vector<std::string>> paths;
    for (const std::string& b : s.backends)
      if (const std::string p = JsonView(s.contexts)[b]["bf16_products"].str_or(""); !p.empty())
        paths[p].push_back(b);
    std::vector<std::string> said;
    for (const auto& [path, list] : paths)
      said.push_back(fmt::format("{} ({})", path, fmt::join(list, ", ")));
    if (!said.empty()) threads += fmt::format("; bf16 products: {}", fmt::join(said, "; "));
  }
  if (const std::string load = JsonView(s.options)["background"].str_or("none"); load != "none")
    threads += fmt::format("; background: {} beside {}", load,
                           JsonView(s.options)["background_beside"].str_or("every row"));
  return wrapped(fmt::format("summary of {} (study {}); {}", s.run_id, s.study, threads), 2) +
         wrapped(fmt::format("machine: {} ({} family {} model {} stepping {}), CPUs {} of {}, "
                             "kernel {}, governor {}",
                             JsonView(s.machine)["cpu_model"].str_or("?"),
                             env["cpu_vendor"].str_or("?"), env["cpu_family"].str_or("?"),
                             env["cpu_model_number"].str_or("?"), env["cpu_stepping"].str_or("?"),
                             env["cpu_affinity"].str_or("?"), env["cpus_online"].str_or("?"),
                             kernel.substr(0, kernel.find(' ')), env["cpu_governor"].str_or("?")),
                 2);
}

// Medians, and each backend's time over the reference's beside its own.
inline std::string time_table(const Summary& s, size_t width) {
  std::string out =
      fmt::format("\nmedian time per step; beside each, its time over {}'s:\n", s.reference);
  for (const std::vector<std::string>& block : column_blocks(s, width, 11, 18)) {
    out += fmt::format("{:<{}}", "instance", width);
    for (const std::string& b : block)
      out += fmt::format(" {:>{}}", b, b == s.reference ? 10 : std::max<size_t>(17, b.size()));
    out += "\n";
    for (const SummaryRow& row : s.rows) {
      out += fmt::format("{:<{}}", row.instance, width);
      for (const std::string& b : block) {
        auto it = row.cells.find(b);
        const std::string t = it == row.cells.end() ? "-" : time_text(it->second);
        if (b == s.reference)
          out += fmt::format(" {:>10}", t);
        else
          out += fmt::format(" {:>{}} {:>6}", t, std::max<size_t>(17, b.size()) - 7,
                             human_ratio(s.ratio(row, b)));
      }
      out += "\n";
    }
  }
  return out;
}

inline std::string memory_table(const Summary& s, size_t width) {
  std::string out = "\npeak RSS of each benchmark's process (wait4):\n";
  for (const std::vector<std::string>& block : column_blocks(s, width, 0, 11)) {
    out += fmt::format("{:<{}}", "instance", width);
    for (const std::string& b : block)
      out += fmt::format(" {:>{}}", b, std::max<size_t>(10, b.size()));
    out += "\n";
    for (const SummaryRow& row : s.rows) {
      out += fmt::format("{:<{}}", row.instance, width);
      for (const std::string& b : block) {
        auto it = row.cells.find(b);
        out += fmt::format(" {:>{}}", it == row.cells.end() ? "-" : memory_text(it->second),
                           std::max<size_t>(10, b.size()));
      }
      out += "\n";
    }
  }
  return out;
}

inline std::string marks_and_crossovers(const Summary& s) {
  std::string out;
  bool any_wide = false, any_unverified = false;
  double level = NAN;
  for (const SummaryRow& row : s.rows)
    for (const auto& [b, c] : row.cells) {
      if (c.status == "ok" && std::isfinite(c.interval.level))
        any_wide |= c.wide(), level = c.interval.level;
      any_unverified |= c.status == "ok" && !c.verified;
    }
  if (any_wide)
    out += wrapped(fmt::format("~ wide: the {:.1f}% interval of the median (order statistics of "
                               "the repetitions, summary.json) spans more than {:.0f}% of it",
                               level * 100, Cell::kWideSpread * 100),
                   2);
  if (any_unverified)
    out += wrapped(
        "? unverified: the check had no other backend and no answer of the workload's own to "
        "compare it with (check.json)",
        2);
  std::map<std::string, std::vector<std::string>> by_workload;
  for (const Crossover& c : s.crossovers())
    by_workload[c.workload].push_back(
        c.from ? fmt::format("{} faster from {}={}", c.baseline, c.size_key, c.from)
               : fmt::format("{} none up to {}={}", c.baseline, c.size_key, c.largest));
  if (!by_workload.empty())
    out += fmt::format("\ncrossovers (a backend faster than {} from that size on, beyond doubt):\n",
                       s.reference);
  for (const SummaryRow& row : s.rows) {
    auto it = by_workload.find(std::string(row.workload->name));
    if (it == by_workload.end()) continue;
    out += wrapped(fmt::format("  {}: {}", it->first, fmt::join(it->second, "; ")), 4);
    by_workload.erase(it);
  }
  return out;
}

// A row's cell of `backend` if it ran well, else null: the studies' tables compare such cells.
inline const Cell* ran(const SummaryRow& row, const std::string& backend) {
  auto it = row.cells.find(backend);
  return it != row.cells.end() && it->second.status == "ok" ? &it->second : nullptr;
}
inline std::string time_or_dash(const Cell* c) {
  return c ? human_time(c->median_seconds) : std::string("-");
}

inline std::string summary_text(const Summary& s) {
  size_t width = 8;
  for (const SummaryRow& row : s.rows) width = std::max(width, row.instance.size());
  std::string text = "\n" + machine_lines(s) + time_table(s, width) + memory_table(s, width) +
                     marks_and_crossovers(s);
  for (const Study& study : studies())  // each study's own table, where the run holds its data
    if (study.table) text += study.table(s);
  return text;
}

}  // namespace bp

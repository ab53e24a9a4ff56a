// studies/contention/rows.h: the study contention's backends: ours compiled, ours eager and
// libtorch at one thread and at two, each timed beside busy processes (bench_run --background; one
// at nice 0 unless given), which are stopped during every other row's turns. Each is the study
// threads's two-thread row (studies/threads/rows.h) at its own threads, under load, drawn darker.
#pragma once

#include <string_view>

#include "harness/runner/backends.h"
#include "studies/threads/rows.h"

namespace bp {

// The study threads's row `of`, renamed, at `threads` (0: --threads), timed under load.
constexpr BackendSpec busy_row(std::string_view of, const char* name, int threads,
                               const char* color, const char* marker) {
  BackendSpec row{};
  for (const BackendSpec& b : kThreadsRows)
    if (std::string_view(b.name) == of) row = b;
  row.name = name, row.fixed_threads = threads, row.under_load = true;
  row.color = color, row.marker = marker;
  return row;
}

inline constexpr BackendSpec kContentionRows[] = {
    busy_row("compiled_2t", "compiled_busy", 0, "#3f6e12", "P"),
    busy_row("compiled_2t", "compiled_2t_busy", 2, "#7a9a3c", "X"),
    busy_row("engine_2t", "engine_busy", 0, "#1b7a5e", "P"),
    busy_row("engine_2t", "engine_2t_busy", 2, "#5fae96", "X"),
    busy_row("libtorch_2t", "libtorch_busy", 0, "#8a3c01", "P"),
    busy_row("libtorch_2t", "libtorch_2t_busy", 2, "#e8955a", "X")};
static_assert(kContentionRows[0].program && kContentionRows[2].program &&
                  kContentionRows[4].program,
              "the study threads names compiled_2t, engine_2t and libtorch_2t");

}  // namespace bp

// studies/kernels/phase.h: the study kernels' kernel rows (phase.cc).
#pragma once

namespace bp {

struct RunState;
void kernel_rows_phase(RunState& run);

}  // namespace bp

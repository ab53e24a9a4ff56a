// studies/bptt/phase.h: the study bptt's interval sweep (phase.cc).
#pragma once

namespace bp {

struct RunState;
void interval_sweep_phase(RunState& run);

}  // namespace bp

// engine/compiled/program.cc: the compiled mode's Program<float> (engine/compiled/program.h),
// instantiated once here for every program and test that compiles tensor steps.
#include "engine/compiled/program.h"

namespace bp {

template class Program<float>;
template class Program<double>;  // bp_gradbench's tensor forms in float64

}  // namespace bp

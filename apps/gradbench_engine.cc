// apps/gradbench_engine.cc: the one instantiation of bp_gradbench's session over our engine
// (apps/gradbench_engine.h), linked by bp_gradbench and gradbench_test.
#include "apps/gradbench_engine.h"

namespace bp::gradbench {

template class Session<OurEngineBackends>;

}  // namespace bp::gradbench

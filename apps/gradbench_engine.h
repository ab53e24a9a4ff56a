// apps/gradbench_engine.h: bp_gradbench's session over our engine (its scalar tape, compiled
// program and tensor graphs), declared here and compiled once, in apps/gradbench_engine.cc, for
// the tool and its tests: instantiating every eval over four backends is most of either's build.
#pragma once

#include "apps/gradbench_backends.h"
#include "engine/backend.h"
#include "engine/compiled/backend.h"

namespace bp::gradbench {

using OurEngineBackends =
    EngineBackends<EngineBackend, EngineDoubleBackend, CompiledBackend, CompiledDoubleBackend>;
extern template class Session<OurEngineBackends>;

}  // namespace bp::gradbench

// harness/harness_test.h: what the harness's tests share (harness/*/*_test.cc, one binary,
// harness_test, built as one translation unit).
#pragma once

#include "harness/common/json.h"
#include "workloads/registry.h"

namespace {

using bp::dump_json;
using bp::Json;
using bp::json_numbers;
using bp::JsonView;

inline const bp::WorkloadInfo& workload(const char* name) { return *bp::find_workload(name); }

}  // namespace

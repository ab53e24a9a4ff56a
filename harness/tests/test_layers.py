"""harness/tests/test_layers.py: the include checker (harness/tests/layers.py) finds every kind of
wrong arrow in a made-up tree, and lets the edges, the tests and the right arrows be."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layers  # noqa: E402


def tree(tmp_path, files):
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    return sorted(p.split(": includes ")[0] for p in layers.check(str(tmp_path)))


def test_every_wrong_arrow_is_named_and_the_right_ones_pass(tmp_path):
    found = tree(tmp_path, {
        "engine/kernels/products.h": '#include "engine/core/ops.h"\n',          # up a layer
        "engine/core/ops.h": '#include "engine/kernels/products.h"\n',           # down: fine
        "engine/compiled/program.h": '#include "engine/checkpoint/io.h"\n',      # sideways
        "engine/dialects/dialects.h": '#include "harness/common/proc.h"\n',      # out of engine
        "engine/backend.h": '#include "workloads/backend.h"\n'
                            '#include "workloads/registry.h"\n',                 # concepts only
        "harness/gradbench/tool.h": '#include "engine/backend.h"\n',             # harness->engine
        "harness/runner/run.cc": '#include "workloads/registry.h"\n',            # fine
        "workloads/models.h": '#include "harness/common/json.h"\n',              # workloads->up
        "baselines/libtorch/backend.h": '#include "harness/driver/hooks.h"\n',   # not common/
        "apps/bench_engine.cc": '#include "engine/backend.h"\n'
                                '#include "harness/driver/backend_main.h"\n',    # an edge
        "studies/kernels/rows.h": '#include "engine/compiled/backend.h"\n',      # an edge
        "engine/core/tensor_test.cc": '#include "workloads/registry.h"\n',       # a test
    })
    assert found == ["baselines/libtorch/backend.h:1", "engine/backend.h:2",
                     "engine/compiled/program.h:1", "engine/dialects/dialects.h:1",
                     "engine/kernels/products.h:1", "harness/gradbench/tool.h:1",
                     "workloads/models.h:1"], found


def test_this_tree_has_no_wrong_arrow():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    assert layers.check(root) == []

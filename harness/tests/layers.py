#!/usr/bin/python3
"""harness/tests/layers.py: the tree's layers, read from its #include lines; exit 1 on an arrow
the wrong way, each named with its file and line.

The layers point down only:
  engine/   runtime < kernels < core < dialects < compiled, checkpoint, distributed < the adapters
            (engine/backend.h, engine/compiled/backend.h: the engine as the workloads' backend
            concepts); a folder includes its own and the layers below it, and of workloads/
            only the concepts (workloads/backend.h)
  workloads/  itself only: each workload is written once, over the concepts
  harness/    itself and workloads/ (the registry, the names), never engine/ or baselines/
  baselines/  itself, workloads/ and harness/common/
Only the edges cross: apps/ (every main()), studies/ (what one study alone needs) and dev/ (the
lab) may include any layer. Tests (*_test.cc, *_test.h, tests/) exercise a layer with what is
above it, and may too.
    /usr/bin/python3 harness/tests/layers.py [SOURCE_DIR]      (ctest -R layers_check)
"""
import os
import re
import sys

ENGINE_ORDER = {"runtime": 0, "kernels": 1, "core": 2, "dialects": 3, "compiled": 4,
                "checkpoint": 4, "distributed": 4}
EDGES = ("apps", "studies", "dev")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def is_test(path):
    name = os.path.basename(path)
    return "_test." in name or "/tests/" in f"/{path}"


ADAPTERS = ("engine/backend.h", "engine/compiled/backend.h")


def engine_level(path):
    """(level, folder) of a file under engine/: the adapters sit above every folder."""
    if path in ADAPTERS:
        return 5, "adapters"
    parts = path.split("/")
    return ENGINE_ORDER.get(parts[1], -1) if len(parts) > 2 else -1, parts[1]


def why_wrong(source, target):
    """Why `source` may not include `target` (paths from the root), or None."""
    top, to = source.split("/")[0], target.split("/")[0]
    if top in EDGES or is_test(source) or "/" not in target:
        return None
    if top == "engine":
        if to == "workloads":
            return None if target == "workloads/backend.h" else \
                "the engine knows of workloads/ only the backend concepts (workloads/backend.h)"
        if to != "engine":
            return f"the engine includes nothing of {to}/"
        (lvl, folder), (to_lvl, to_folder) = engine_level(source), engine_level(target)
        if folder == to_folder or to_lvl < lvl:
            return None
        return (f"engine/{folder} (layer {lvl}) may not include {target} (layer {to_lvl}): "
                "runtime < kernels < core < dialects < compiled, checkpoint < adapters")
    allowed = {"workloads": ("workloads",),
               "harness": ("harness", "workloads"),
               "baselines": ("baselines", "workloads", "harness/common")}.get(top)
    if allowed is None or any(target == a or target.startswith(a + "/") for a in allowed):
        return None
    return f"{top}/ may include {', '.join(a + '/' for a in allowed)} only"


def check(root):
    """Every wrong arrow under `root`, as 'file:line: includes X: why'."""
    problems = []
    for top in ("apps", "engine", "workloads", "harness", "baselines", "studies", "dev"):
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cc")):
                    continue
                path = os.path.relpath(os.path.join(folder, name), root)
                with open(os.path.join(root, path), errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        why = m and why_wrong(path, m.group(1))
                        if why:
                            problems.append(f"{path}:{number}: includes {m.group(1)}: {why}")
    return problems


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    problems = check(root)
    for p in problems:
        print(p)
    print(f"layers: {len(problems)} include(s) the wrong way" if problems else
          "layers: every include points down a layer or stays in its own")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

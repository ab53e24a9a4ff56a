"""harness/tests/test_gradbench.py: bp_gradbench as GradBench runs it, end to end through the
binary: a protocol session on stdin/stdout (one response a line, for every message, bad ones
included), GradBench's C++ convention (FILE FUNCTION, run as bin/<module>), and --backend libtorch
through its own binary."""
import json
import os
import resource
import signal
import subprocess


def run_session(bin_dir, lines, backend="scalar"):
    proc = subprocess.run([os.path.join(bin_dir, "bp_gradbench"), "--backend", backend],
                          input="".join(line + "\n" for line in lines), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def our_input(bin_dir, workload, size):
    out = subprocess.run([os.path.join(bin_dir, "bp_gradbench"), "--write-input", workload,
                          str(size)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_a_session_answers_every_message_in_order(bin_dir):
    lstm = our_input(bin_dir, "lstm", 16) | {"min_runs": 2, "min_seconds": 0}
    messages = [
        {"id": 0, "kind": "start", "eval": "lstm"},
        {"id": 1, "kind": "define", "module": "lstm"},
        {"id": 2, "kind": "evaluate", "module": "lstm", "function": "objective", "input": lstm},
        {"id": 3, "kind": "evaluate", "module": "lstm", "function": "jacobian", "input": lstm,
         "description": "l=2,c=16"},
        {"id": 4, "kind": "analysis", "of": 3, "valid": False, "error": "made up"},
    ]
    lines = [json.dumps(m) for m in messages]
    lines.insert(2, "{this is not json")
    lines.insert(3, "")  # a blank line is no message
    responses, stderr = run_session(bin_dir, lines, backend="compiled")
    assert [r.get("id") for r in responses] == [0, 1, None, 2, 3, 4]
    assert responses[0]["tool"] == "backprop-bench"
    assert responses[1] == {"id": 1, "success": True}
    assert responses[2]["success"] is False and "not JSON" in responses[2]["error"]
    assert isinstance(responses[3]["output"], float)
    jacobian = responses[4]["output"]
    bits = len(lstm["extra_params"][0])
    assert len(jacobian) == 8 * 2 * bits + 3 * bits  # main_params then extra_params, flat
    assert [t["name"] for t in responses[4]["timings"]] == ["prepare", "compile", "evaluate",
                                                             "evaluate"]
    assert all(isinstance(t["nanoseconds"], int) for t in responses[4]["timings"])
    assert responses[5] == {"id": 4}
    assert "judged evaluation 3 invalid: made up" in stderr


def test_gradbenchs_cpp_convention_as_bin_module(bin_dir, tmp_path):
    (tmp_path / "bin").mkdir()
    link = tmp_path / "bin" / "gmm"
    os.symlink(os.path.join(bin_dir, "bp_gradbench"), link)
    gmm = our_input(bin_dir, "gmm_d2", 3) | {"min_runs": 3}
    (tmp_path / "input.json").write_text(json.dumps(gmm))
    out = subprocess.run([str(link), str(tmp_path / "input.json"), "jacobian"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    first, *timings = out.stdout.splitlines()
    jacobian = json.loads(first)
    assert sorted(jacobian) == ["alpha", "l", "mu", "q"]
    assert len(jacobian["alpha"]) == 3 and len(jacobian["mu"]) == 3 and len(jacobian["mu"][0]) == 2
    assert [json.loads(t)["name"] for t in timings] == ["prepare"] + ["evaluate"] * 3
    # a function the module lacks: exit 1 and one line saying what is valid
    bad = subprocess.run([str(link), str(tmp_path / "input.json"), "hessian"],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.strip() == ("bp_gradbench: unknown function 'hessian' of gmm; valid: "
                                  "objective, jacobian")
    # run under its own name, it needs the module named
    own = subprocess.run([os.path.join(bin_dir, "bp_gradbench"), str(tmp_path / "input.json"),
                          "jacobian"], capture_output=True, text=True)
    assert own.returncode == 2 and "--module M" in own.stderr


def test_libtorch_runs_in_its_own_binary_near_the_scalar_graph(bin_dir, tmp_path):
    """--backend libtorch: bp_gradbench (no libtorch linked) runs bp_gradbench_libtorch with the
    same arguments; its gradient against the scalar graph's, by GradBench's measure: to rounding
    in float64 (the default), near GradBench's tolerance in float32."""
    gmm = our_input(bin_dir, "gmm_d10", 4) | {"min_runs": 2}
    (tmp_path / "gmm.json").write_text(json.dumps(gmm))

    def jacobian(backend, *flags):
        out = subprocess.run([os.path.join(bin_dir, "bp_gradbench"), "--backend", backend, *flags,
                              "--module", "gmm", str(tmp_path / "gmm.json"), "jacobian"],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        first, *timings = out.stdout.splitlines()
        assert [json.loads(t)["name"] for t in timings] == ["prepare", "evaluate", "evaluate"]
        j = json.loads(first)
        return [v for part in ("alpha", "mu", "q", "l") for row in j[part]
                for v in (row if isinstance(row, list) else [row])]

    def error(xs, ys):
        assert len(xs) == len(ys)
        return max(abs(x - y) / max(1, abs(x) + abs(y)) for x, y in zip(xs, ys))

    scalar_grads = jacobian("scalar")
    error64 = error(jacobian("libtorch"), scalar_grads)
    error32 = error(jacobian("libtorch", "--precision", "float32"), scalar_grads)
    # float32 sums over 1000 points: near GradBench's 1e-4 (tool_test.cc says why 2e-4 here)
    print(f"libtorch gmm d=10 k=4: GradBench's error {error64:.1e} in float64 (tolerance 1e-11), "
          f"{error32:.1e} in float32 (2e-4)")
    assert error64 <= 1e-11 and error32 <= 2e-4
    lse = subprocess.run([os.path.join(bin_dir, "bp_gradbench"), "--backend", "libtorch"],
                         input='{"id": 1, "kind": "define", "module": "lse"}\n',
                         capture_output=True, text=True)
    assert "no tensor form" in json.loads(lse.stdout)["error"]


def test_precision_is_the_tensor_forms_and_a_bad_one_is_one_line(bin_dir):
    """--precision float32 on a scalar backend, or a precision that does not exist: one line and
    exit 2, naming what is valid; a session says its precision in its start reply."""
    tool = os.path.join(bin_dir, "bp_gradbench")
    for argv, message in [(["--backend", "scalar", "--precision", "float32"],
                           "--backend scalar computes its scalar graph in double only"),
                          (["--precision", "half"], "--precision half: valid: float64, float32"),
                          (["--precision", "bf16"], "--precision bf16: valid: float64, float32 "
                                                    "(GradBench's evals are checked in float64")]:
        r = subprocess.run([tool, *argv], input="", capture_output=True, text=True)
        assert r.returncode == 2 and message in r.stderr.splitlines()[0], r.stderr
    r = subprocess.run([tool, "--backend", "engine", "--precision=float32"],
                       input='{"id": 0, "kind": "start"}\n', capture_output=True, text=True)
    assert json.loads(r.stdout)["config"] == {"backend": "engine", "precision": "float32"}
    # --write-input names every eval it writes, det and ode included (it wrote them, unnamed)
    r = subprocess.run([tool, "--write-input", "nope", "1"], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert "(lse, llsq, lstm, gmm_d2, gmm_d10, ode, det)" in r.stderr.splitlines()[0], r.stderr


def gradbench_session(tool_argv, messages, log_path):
    """Plays GradBench's eval and intermediary: each message to the tool, each response back, and
    the session logged as `gradbench run` logs it (an "elapsed" and a message or a response a
    line)."""
    import time
    proc = subprocess.Popen(tool_argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    start = time.monotonic_ns()
    with open(log_path, "w") as log:
        for m in messages:
            log.write(json.dumps({"elapsed": {"nanoseconds": time.monotonic_ns() - start},
                                  "message": m}) + "\n")
            proc.stdin.write(json.dumps(m) + "\n")
            proc.stdin.flush()
            r = json.loads(proc.stdout.readline())
            log.write(json.dumps({"elapsed": {"nanoseconds": time.monotonic_ns() - start},
                                  "response": r}) + "\n")
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0


def test_import_puts_gradbenchs_tools_beside_our_backends(bin_dir, tmp_path):
    out = tmp_path / "results"
    run = subprocess.run([os.path.join(bin_dir, "bench_run"), "--out", str(out), "--backends",
                          "engine", "--workloads", "lse", "--sizes", "elements=2500,20000",
                          "--repetitions", "3", "--no-plots"], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    ours = next(p for p in out.iterdir() if p.is_dir() and not p.is_symlink())
    lse = our_input(bin_dir, "lse", 2500) | {"min_runs": 5, "min_seconds": 0}
    small_llsq = {"x": [0.5, 0.25, 0.125], "n": 10, "min_runs": 1, "min_seconds": 0}
    gradbench_session([os.path.join(bin_dir, "bp_gradbench"), "--backend", "compiled"], [
        {"id": 0, "kind": "start", "eval": "lse"},
        {"id": 1, "kind": "define", "module": "lse"},
        {"id": 2, "kind": "evaluate", "module": "lse", "function": "primal", "input": lse,
         "description": "n=2500"},
        {"id": 3, "kind": "analysis", "of": 2, "valid": True},
        {"id": 4, "kind": "evaluate", "module": "lse", "function": "gradient", "input": lse,
         "description": "n=2500"},
        {"id": 5, "kind": "analysis", "of": 4, "valid": True},
        {"id": 6, "kind": "evaluate", "module": "llsq", "function": "gradient",
         "input": small_llsq, "description": "n=10,m=3"},
    ], tmp_path / "ours.jsonl")
    # a tool of theirs, written by hand: one valid gradient, one GradBench judged invalid
    lines = [
        {"message": {"id": 0, "kind": "start", "eval": "lse"}},
        {"response": {"id": 0, "tool": "adol-c"}},
        {"message": {"id": 1, "kind": "evaluate", "module": "lse", "function": "gradient",
                     "input": {"x": [0.5] * 2500}, "description": "n=2500"}},
        {"response": {"id": 1, "success": True, "output": [0.0004] * 2500, "timings": [
            {"name": "prepare", "nanoseconds": 10**9},
            {"name": "evaluate", "nanoseconds": 300000}, {"name": "evaluate", "nanoseconds": 100000},
            {"name": "evaluate", "nanoseconds": 200000}]}},
        {"message": {"id": 2, "kind": "analysis", "of": 1, "valid": True}},
        {"message": {"id": 3, "kind": "evaluate", "module": "lse", "function": "gradient",
                     "input": {"x": [0.5] * 20000}, "description": "n=20000"}},
        {"response": {"id": 3, "success": True, "output": [0.0] * 20000,
                      "timings": [{"name": "evaluate", "nanoseconds": 2000000}]}},
        {"message": {"id": 4, "kind": "analysis", "of": 3, "valid": False,
                     "error": "Mismatch at index 0"}},
    ]
    (tmp_path / "adol-c.jsonl").write_text(
        "".join(json.dumps({"elapsed": {"nanoseconds": i}} | line) + "\n"
                for i, line in enumerate(lines)))
    imported = subprocess.run([os.path.join(bin_dir, "bench_run"), "import-gradbench",
                               str(tmp_path / "ours.jsonl"), str(tmp_path / "adol-c.jsonl"),
                               "--into", str(ours), "--out", str(out)],
                              capture_output=True, text=True)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    merged = out / (ours.name + "+gradbench")
    summary = json.loads((merged / "summary.json").read_text())
    assert summary["backends"] == ["engine", "gradbench_backprop_bench", "gradbench_adol_c"]
    rows = {r["instance"]: r["backends"] for r in summary["rows"]}
    theirs = rows["grad/lse/elements:2500"]["gradbench_adol_c"]
    assert theirs["status"] == "ok" and theirs["median_seconds"] == 200e-6
    assert theirs["repetition_seconds"] == [300e-6, 100e-6, 200e-6]  # prepare is not a run
    assert rows["grad/lse/elements:2500"]["gradbench_backprop_bench"]["status"] == "ok"
    assert len(rows["grad/lse/elements:2500"]["gradbench_backprop_bench"]
               ["repetition_seconds"]) == 5
    invalid = rows["grad/lse/elements:20000"]["gradbench_adol_c"]
    assert invalid["status"] == "wrong" and "Mismatch at index 0" in invalid["message"]
    text = (merged / "summary.txt").read_text()
    assert "lse primal n=2500: its primal (bench_run times gradients)" in text
    assert "llsq gradient n=10,m=3: m = 3 (our llsq has 128)" in text
    assert max(len(line) for line in text.splitlines()[:-1]) <= 120  # the last: the folder
    assert (merged / "plots" / "gradbench.png").exists()
    # a line that is no JSON: one line naming the file and line, nothing written
    (tmp_path / "broken.jsonl").write_text('{"message": {"id": 0}}\nnot json\n')
    bad = subprocess.run([os.path.join(bin_dir, "bench_run"), "import-gradbench",
                          str(tmp_path / "broken.jsonl"), "--out", str(out)],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "broken.jsonl:2: not a GradBench log line" in bad.stderr


# On a full disk (files capped at 1000 bytes) an import is one line and exit 4, and its folder
# stays marked INCOMPLETE rather than looking whole.
def test_an_import_on_a_full_disk_is_one_line_and_marked(bin_dir, tmp_path):
    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))

    lines = [
        {"message": {"id": 0, "kind": "start", "eval": "lse"}},
        {"response": {"id": 0, "tool": "adol-c"}},
        {"message": {"id": 1, "kind": "evaluate", "module": "lse", "function": "gradient",
                     "input": {"x": [0.5] * 2500}, "description": "n=2500"}},
        {"response": {"id": 1, "success": True, "output": [0.0004] * 2500,
                      "timings": [{"name": "evaluate", "nanoseconds": 300000}]}},
        {"message": {"id": 2, "kind": "analysis", "of": 1, "valid": True}},
    ]
    (tmp_path / "adol-c.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "results"
    r = subprocess.run([os.path.join(bin_dir, "bench_run"), "import-gradbench",
                        str(tmp_path / "adol-c.jsonl"), "--out", str(out)],
                       capture_output=True, text=True, preexec_fn=small_files)
    assert r.returncode == 4, r.stdout + r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "File too large" in errors[0], r.stderr
    assert "is left marked INCOMPLETE" in errors[0], errors[0]
    [folder] = [p for p in out.iterdir() if p.is_dir()]
    assert (folder / "INCOMPLETE").exists()
    assert not (folder / "summary.json").exists() and not list(folder.glob("*.tmp"))


# --help is help (exit 0, on stdout); a directory given as the input file is one clear line.
def test_help_and_a_directory_as_input(bin_dir, tmp_path):
    tool = os.path.join(bin_dir, "bp_gradbench")
    r = subprocess.run([tool, "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.startswith("bp_gradbench: our engine as a GradBench tool")
    assert "usage: bp_gradbench" in r.stdout and "unknown flag" not in r.stdout
    r = subprocess.run([tool, "--module", "det", str(tmp_path), "gradient"], capture_output=True,
                       text=True)
    assert r.returncode == 2
    assert r.stderr.splitlines()[0] == f"bp_gradbench: {tmp_path}: a directory, not an input file"


# What an import must not take on trust: timings that are no durations, a summary.json that is
# no summary, a run_id that names another folder, an interrupted run, a flag given as a folder.
def test_an_import_takes_nothing_on_trust(bin_dir, tmp_path):
    bench_run = os.path.join(bin_dir, "bench_run")
    out = tmp_path / "results"
    timings = ["NaN", None, "missing", -5, 1e300, 1.5]
    lines = [{"response": {"id": 0, "tool": "odd"}}]
    for i, t in enumerate(timings):
        size = 2500 * (i + 1)
        timing = {"name": "evaluate"} | ({} if t == "missing" else {"nanoseconds": t})
        lines += [{"message": {"id": 10 + i, "kind": "evaluate", "module": "lse",
                               "function": "gradient", "input": {"x": [0.5] * size}}},
                  {"response": {"id": 10 + i, "success": True, "output": [0.1] * size,
                                "timings": [timing]}}]
    log = "".join(json.dumps(line) + "\n" for line in lines)
    (tmp_path / "odd.jsonl").write_text(log)
    r = subprocess.run([bench_run, "import-gradbench", str(tmp_path / "odd.jsonl"), "--out",
                        str(out)], capture_output=True, text=True)
    assert r.returncode == 0 and "plots failed" not in r.stderr, r.stdout + r.stderr
    summary = json.loads(next(out.glob("*-gradbench/summary.json")).read_text())
    cells = [row["backends"]["gradbench_odd"] for row in summary["rows"]]
    assert len(cells) == len(timings)
    for cell in cells:
        assert cell["status"] == "failed", cell
        assert "not a whole number of nanoseconds" in cell["message"], cell["message"]
    # 1e999 is past a double's range, a number no strict reader takes: the log is refused with
    # its line named, and nothing is written
    (tmp_path / "inf.jsonl").write_text(log.replace('"nanoseconds": 1e+300', '"nanoseconds": 1e999'))
    r = subprocess.run([bench_run, "import-gradbench", str(tmp_path / "inf.jsonl"), "--out",
                        str(tmp_path / "inf-results")], capture_output=True, text=True)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "inf.jsonl:11: not a GradBench log line" in r.stderr, r.stderr
    assert "number overflow parsing '1e999'" in r.stderr, r.stderr
    assert not (tmp_path / "inf-results").exists()
    # --into a folder whose summary.json is no summary, or names another folder as its run
    (tmp_path / "good.jsonl").write_text("".join(json.dumps(line) + "\n" for line in [
        {"message": {"id": 1, "kind": "evaluate", "module": "lse", "function": "gradient",
                     "input": {"x": [0.5] * 2500}}},
        {"response": {"id": 1, "success": True, "output": [0.1] * 2500,
                      "timings": [{"name": "evaluate", "nanoseconds": 1000}]}}]))
    fake = tmp_path / "fake-run"
    fake.mkdir()
    for text in ["{}", "[]", '{"run_id": "x", "rows": {}, "backends": []}',
                 '{"run_id": "x", "rows": [], "backends": ["engine"]}']:
        (fake / "summary.json").write_text(text)
        r = subprocess.run([bench_run, "import-gradbench", str(tmp_path / "good.jsonl"),
                            "--into", str(fake), "--out", str(out)], capture_output=True,
                           text=True)
        assert r.returncode == 2, text
        assert "not a summary of bench_run" in r.stderr, r.stderr
    (fake / "summary.json").write_text(
        '{"run_id": "../../escaped", "study": "main", "backends": ["engine"], '
        '"threads": {"engine": 1}, "rows": []}')
    (fake / "INCOMPLETE").write_text("")
    r = subprocess.run([bench_run, "import-gradbench", str(tmp_path / "good.jsonl"), "--into",
                        str(fake), "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    merged = out / "fake-run+gradbench"
    assert (merged / "summary.json").exists() and (merged / "INCOMPLETE").exists()
    assert not (tmp_path.parent / "escaped+gradbench").exists()
    assert "incomplete: " in (merged / "summary.txt").read_text()
    # a flag where a folder belongs
    r = subprocess.run([bench_run, "import-gradbench", str(tmp_path / "good.jsonl"), "--into",
                        "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 2 and "--into takes a folder, not --out" in r.stderr, r.stderr


# A session that cannot read a message (a line larger than its memory) or write a reply (a full
# disk behind stdout) says so in one line and exits 1: GradBench's eval would otherwise wait.
def test_an_unreadable_message_or_unwritable_reply_is_one_line(bin_dir, tmp_path):
    tool = os.path.join(bin_dir, "bp_gradbench")
    with open("/dev/full", "w") as full:
        r = subprocess.run([tool], input='{"id": 0, "kind": "start"}\n', stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("error: stdout: cannot write the reply to message") and \
        "No space left on device" in r.stderr and r.stderr.count("\n") == 1, r.stderr

    def small_memory():
        resource.setrlimit(resource.RLIMIT_AS, (400 << 20, 400 << 20))

    huge = b'{"id": 0, "kind": "' + b"x" * (300 << 20) + b'"}\n'
    r = subprocess.run([tool], input=huge, capture_output=True, preexec_fn=small_memory,
                       timeout=60)
    assert r.returncode == 1 and r.stdout == b"", r.stderr
    assert r.stderr.startswith(b"error: stdin: a message could not be read"), r.stderr


# A min_runs whose runs would take past the ten minutes an evaluation may take is refused after
# the first run, in the reply, saying how many fit; the session goes on.
def test_min_runs_past_ten_minutes_is_refused_after_one_run(bin_dir):
    big = our_input(bin_dir, "det", 9)  # some 20 ms a run: 10^5 runs would be half an hour
    big["min_runs"] = 100000
    replies, _ = run_session(bin_dir, [
        '{"id": 0, "kind": "define", "module": "det"}',
        json.dumps({"id": 1, "kind": "evaluate", "module": "det", "function": "gradient",
                    "input": big}),
        '{"id": 2, "kind": "define", "module": "det"}'])
    assert replies[1]["id"] == 1 and replies[1].get("success") is False, replies[1]
    assert "min_runs: 100000 runs of" in replies[1]["error"] and "at most" in replies[1]["error"]
    assert replies[2] == {"id": 2, "success": True}, replies[2]


# Logs an import must say something of: a directory, an empty log, one given twice, two tools
# whose names differ only in punctuation (one backend name), a size past any size (llsq n 1e300
# was a negative size).
def test_an_import_names_every_log_it_cannot_take(bin_dir, tmp_path):
    bench_run = os.path.join(bin_dir, "bench_run")

    def log(tool, lse_size, extra=()):
        lines = [{"response": {"id": 0, "tool": tool}},
                 {"message": {"id": 1, "kind": "evaluate", "module": "lse",
                              "function": "gradient", "input": {"x": [0.5] * lse_size}}},
                 {"response": {"id": 1, "success": True, "output": [0.1] * lse_size,
                               "timings": [{"name": "evaluate", "nanoseconds": 1000}]}}]
        return "".join(json.dumps(line) + "\n" for line in lines + list(extra))

    def imported(*logs):
        return subprocess.run([bench_run, "import-gradbench", *map(str, logs), "--out",
                               str(tmp_path / "out")], capture_output=True, text=True)
    (tmp_path / "a.jsonl").write_text(log("tool-a", 2500))
    (tmp_path / "b.jsonl").write_text(log("tool_a", 2500))
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "dir.jsonl").mkdir()
    r = imported(tmp_path / "dir.jsonl")
    assert r.returncode == 2 and "dir.jsonl: a directory, not a GradBench log" in r.stderr, r.stderr
    r = imported(tmp_path / "empty.jsonl")
    assert r.returncode == 2 and "left out: empty.jsonl: empty" in r.stderr, r.stderr
    r = imported(tmp_path / "a.jsonl", tmp_path / "." / "a.jsonl")
    assert r.returncode == 2 and "given twice" in r.stderr, r.stderr
    r = imported(tmp_path / "a.jsonl", tmp_path / "b.jsonl")
    assert r.returncode == 2, r.stderr
    assert "the tools tool-a and tool_a would both be the backend gradbench_tool_a" in r.stderr
    big = [{"message": {"id": 2, "kind": "evaluate", "module": "llsq", "function": "gradient",
                        "input": {"x": [0.1] * 128, "n": 1e300}}}]
    (tmp_path / "big.jsonl").write_text(log("tool-a", 2500, big))
    r = imported(tmp_path / "big.jsonl")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "n = 1e+300 is no size" in r.stdout, r.stdout
    assert not any(line.startswith("error") for line in r.stderr.splitlines()), r.stderr

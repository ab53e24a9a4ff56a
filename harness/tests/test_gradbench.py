"""harness/tests/test_gradbench.py: bp_gradbench as GradBench runs it, end to end through the
binary: a protocol session on stdin/stdout (one response a line, for every message, bad ones
included), and GradBench's C++ convention (FILE FUNCTION, run as bin/<module>)."""
import json
import os
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

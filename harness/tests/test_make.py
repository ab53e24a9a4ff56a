"""harness/tests/test_make.py: the Makefile's verbs under hostile variables.

Every user string (FILTER, WORKLOADS, SIZES, BACKENDS, DATA, REPETITIONS, THREADS, WARMUP, RANKS,
MEMORY, RUN, RESUME, A, B, THRESHOLD) must reach bench_run or plot.py as exactly one argument,
through no shell and no make expansion, including the make that `cmake --build` starts; and
`make bench` must fail when the runner does.
    ctest -R harness_pytest --output-on-failure
"""
import os
import shlex
import subprocess

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HOSTILE = ["it's", "x'; touch {p}; echo '", "$(shell touch {p})", "`touch {p}`", "$$(touch {p})",
           "a\"b", "; touch {p}"]


def make(*args, cwd=SOURCE):
    return subprocess.run(["make", "--no-print-directory", "-C", cwd, *args], capture_output=True,
                          text=True, timeout=300)


def test_every_variable_is_one_argument_and_runs_nothing(tmp_path):
    pwned = tmp_path / "pwned"
    for variable, flag in [("FILTER", "--filter"), ("WORKLOADS", "--workloads"),
                           ("BACKENDS", "--backends"), ("DATA", "--data"),
                           ("REPETITIONS", "--repetitions"), ("THREADS", "--threads"),
                           ("WARMUP", "--warmup-steps"), ("MEMORY", "--memory-limit"),
                           ("RANKS", "--ranks")]:
        for text in HOSTILE:
            value = text.format(p=pwned)
            r = make("-n", "bench", f"{variable}={value}")
            assert r.returncode == 0, r.stderr
            argv = shlex.split(r.stdout.strip().splitlines()[-1])
            assert argv[argv.index(flag) + 1] == value, (variable, value, r.stdout)
            assert not pwned.exists(), (variable, value)
    r = make("-n", "bench", "SIZES=nodes=10,100 batch=$(shell touch {})".format(pwned))
    argv = shlex.split(r.stdout.strip().splitlines()[-1])
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--sizes"] == [
        "nodes=10,100", "batch=$(shell", "touch", f"{pwned})"]
    r = make("-n", "plots", f"RUN=x'; touch {pwned}; echo '")
    assert shlex.split(r.stdout.strip().splitlines()[-1])[-1] == f"x'; touch {pwned}; echo '"
    for text in HOSTILE:
        value = text.format(p=pwned)
        argv = shlex.split(make("-n", "bench", f"RESUME={value}").stdout.strip().splitlines()[-1])
        assert argv[argv.index("--resume") + 1] == value
        r = make("-n", "compare", f"BASELINE={value}", f"NEW={value}x", f"THRESHOLD={value}")
        argv = shlex.split(r.stdout.strip().splitlines()[-1])
        assert argv[argv.index("compare") + 1:] == [value, value + "x", "--threshold", value]
    assert not pwned.exists()


# The make that `cmake --build` starts reads MAKEFLAGS: command-line variables must not reach it.
def test_the_build_passes_no_user_variable_on(bin_dir, tmp_path):
    pwned = tmp_path / "pwned"
    r = make("-o", "deps", "build", f"BUILD={bin_dir}", f"FILTER=$(shell touch {pwned})")
    assert r.returncode == 0, r.stdout + r.stderr
    assert not pwned.exists()


# make's own status is 2 for any failed recipe; the recipe's status is on its last line.
def test_make_bench_fails_when_the_runner_does(bin_dir):
    r = make("-o", "build", "bench", f"BUILD={bin_dir}", "FILTER=it's")
    assert r.returncode == 2
    assert "--filter 'it's' matches no benchmark" in r.stderr, r.stderr
    assert r.stderr.rstrip().endswith("Error 2"), r.stderr

"""harness/tests/test_readme.py: README.md and docs/ say what is true.

The front door stays short (at most 200 lines, its first screen naming the commands and showing a
figure); every file, folder and link they name exists; every `make` command they show is one the
Makefile takes (a dry run, `make -n`); and every `build/...` command they show runs as written,
against this build, and ends well. A command too long for the tests says so with `# (long)`.
    /usr/bin/python3 -m pytest harness/tests/test_readme.py
"""
import glob
import os
import re
import shlex
import subprocess

import pytest

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PAGES = ["README.md"] + sorted(os.path.relpath(p, SOURCE)
                               for p in glob.glob(os.path.join(SOURCE, "docs", "*.md"))
                               + glob.glob(os.path.join(SOURCE, "studies", "*", "README.md")))


def read(page):
    with open(os.path.join(SOURCE, page)) as f:
        return f.read()


def commands(page):
    """Every line of the page's ```sh blocks, comments and continuation joined."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", read(page), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip():
                out.append(line.strip())
    return out


def test_the_front_door_is_short_and_says_how_to_start():
    lines = read("README.md").splitlines()
    assert len(lines) <= 200, len(lines)
    first = "\n".join(lines[:40])
    for text in ("make bench", "make test", "make study", "results/", "summary.txt",
                 "docs/reading-a-run.md", "!["):
        assert text in first, text


@pytest.mark.parametrize("page", PAGES)
def test_every_path_named_exists(page):
    text = read(page)
    named = set(re.findall(r"\]\(([^)#]+)\)", text))  # links and images
    named |= {p for p in re.findall(r"`([\w./-]+/[\w./-]*\.(?:h|cc|py|md|sh|txt))`", text)}
    named |= {p.rstrip("/") for p in re.findall(r"`((?:apps|studies|engine|workloads|baselines|"
                                                r"harness|plots|dev|docs)/[\w./-]*)`", text)}
    base = os.path.dirname(os.path.join(SOURCE, page))
    missing = [p for p in sorted(named) if not p.startswith("http")
               and not os.path.exists(os.path.join(SOURCE, p))
               and not os.path.exists(os.path.join(base, p))]
    assert not missing, f"{page} names what does not exist: {missing}"


@pytest.mark.parametrize("page", PAGES)
def test_every_make_command_is_one_the_makefile_takes(page):
    for line in commands(page):
        if not line.startswith("make "):
            continue
        words = shlex.split(line.split(" #")[0])
        r = subprocess.run(["make", "-n", *words[1:]], cwd=SOURCE, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, (line, r.stderr)


@pytest.mark.parametrize("page", PAGES)
def test_every_build_command_runs_as_written(page, bin_dir):
    for line in commands(page):
        if not line.startswith("build/") or "# (long)" in line:
            continue
        words = shlex.split(line.split(" #")[0])
        words[0] = os.path.join(bin_dir, words[0][len("build/"):])
        r = subprocess.run(words, cwd=SOURCE, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, (line, r.stdout[-2000:], r.stderr[-2000:])

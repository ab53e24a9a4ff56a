"""harness/tests/conftest.py: where the built binaries are (ctest passes --bin-dir)."""
import os

import pytest


def pytest_addoption(parser):
    here = os.path.dirname(os.path.abspath(__file__))
    parser.addoption("--bin-dir", default=os.path.join(here, "..", "..", "build"),
                     help="folder holding bench_run, bench_engine and bench_libtorch")


@pytest.fixture(scope="session")
def bin_dir(request):
    return os.path.abspath(request.config.getoption("--bin-dir"))

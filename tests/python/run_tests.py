"""Runs the Python binding's tests: through pytest when it is installed,
else through the small runner in harness.py. CTest calls it twice.

    python3 tests/python/run_tests.py [--host | --gpu] [--no-pytest] [pytest options]

--host runs the tests that need no GPU (library loading, dump_ptx, the
struct layouts against tilejit.h, argument checks on stand-in tensors, the
no-driver error, the library search order, pip install into a scratch
venv, tools/tj-tune.py against stand-ins); --gpu only those that
need torch with a CUDA device; neither, all of them. TILEJIT_LIBRARY picks
the library (CTest sets it to the one just built).

Exit status: 0 when every selected test passed (some may have been skipped
inside, e.g. no ptxas: the closing line counts them); 1 when one failed or
none ran; 77 when every selected test was skipped, e.g. --gpu without a GPU
(CTest reports that as skipped, not passed), and also when all tests were
selected and the GPU ones were skipped for want of a GPU.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODULES = ["test_binding", "test_softmax_args", "test_packaging", "test_tune"]
SKIP = 77


class _Counts:
    """A pytest plugin that counts test outcomes (the call phase, or the
    setup phase for tests skipped before they ran)."""

    def __init__(self):
        self.passed = self.failed = self.skipped = 0

    def pytest_runtest_logreport(self, report):
        if report.skipped:
            self.skipped += 1
        elif report.failed:
            self.failed += 1
        elif report.when == "call":
            self.passed += 1


def _with_pytest(pytest, select, extra):
    marker = {"host": ["-m", "not gpu"], "gpu": ["-m", "gpu"]}.get(select, [])
    counts = _Counts()
    paths = [os.path.join(HERE, f"{name}.py") for name in MODULES]
    status = pytest.main(["-ra", "-p", "no:cacheprovider", *marker, *extra, *paths],
                         plugins=[counts])
    if status != 0:
        return 1
    return SKIP if counts.skipped and (counts.passed == 0 or _gpu_missing(select)) else 0


def _gpu_missing(select):
    """Whether the GPU tests of an all-tests run were skipped for want of a GPU."""
    import harness

    return select == "all" and harness.NO_GPU is not None


def _without_pytest(select):
    sys.path.insert(0, HERE)
    import harness

    print(f"run_tests: pytest is not installed; the built-in runner runs {select} tests",
          flush=True)
    passed, failed, skipped = harness.run_modules(MODULES, select)
    print(f"{passed} passed, {failed} failed, {skipped} skipped", flush=True)
    if failed or passed + skipped == 0:
        return 1
    return SKIP if skipped and (passed == 0 or _gpu_missing(select)) else 0


def main(argv):
    select = "all"
    use_pytest = os.environ.get("TILEJIT_NO_PYTEST") != "1"
    extra = []
    for arg in argv:
        if arg in ("--host", "--gpu"):
            select = arg[2:]
        elif arg == "--no-pytest":
            use_pytest = False
        else:
            extra.append(arg)
    pytest = None
    if use_pytest:
        try:
            import pytest
        except ImportError:
            pass
    if pytest is None:
        if extra:
            print(f"run_tests: {' '.join(extra)} need pytest, which is not installed")
            return 1
        return _without_pytest(select)
    sys.path.insert(0, HERE)
    return _with_pytest(pytest, select, extra)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

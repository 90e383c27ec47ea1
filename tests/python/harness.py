"""What the Python binding's tests share, with or without pytest.

The test modules (test_*.py beside this file) are plain functions that
assert. Under pytest they are collected as usual; where pytest is not
installed (a GPU machine with no network, say), run_tests.py runs them with
the small runner here, which prints the same kind of closing line
("N passed, N failed, N skipped").

- `import tilejit` finds python/tilejit.py of this checkout, unless
  TILEJIT_TEST_INSTALLED=1 asks for the installed copy (pip install).
- @gpu marks a test that needs torch with a CUDA device (pytest marker
  "gpu"); it is skipped, and says why, where there is none.
- skip(why) skips the running test from inside it (no ptxas, no NVRTC).
"""

import importlib
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if os.environ.get("TILEJIT_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(ROOT, "python"))

try:
    import pytest
except ImportError:
    pytest = None


class Skipped(Exception):
    """A test that cannot run here (the runner's own, without pytest)."""


def skip(why):
    if pytest is not None:
        pytest.skip(why)
    raise Skipped(why)


def _probe_gpu():
    """(torch or None, why the GPU tests cannot run or None)."""
    try:
        import torch
    except ImportError:
        return None, "torch is not installed"
    if not torch.cuda.is_available():
        return torch, "torch sees no CUDA device"
    return torch, None


torch, NO_GPU = _probe_gpu()


def gpu(test):
    """Marks test as needing torch and a CUDA device."""
    test.needs_gpu = True
    if pytest is not None:
        test = pytest.mark.skipif(NO_GPU is not None, reason=NO_GPU or "")(test)
        test = pytest.mark.gpu(test)
    return test


# ------------------------------------------------- the runner without pytest


def _tests_of(module, select):
    """module's test functions in the order they are written, those that
    need a GPU only (select "gpu"), none of them ("host") or all."""
    tests = [value for name, value in vars(module).items()
             if name.startswith("test_") and callable(value)]
    tests.sort(key=lambda fn: fn.__code__.co_firstlineno)
    if select == "gpu":
        return [t for t in tests if getattr(t, "needs_gpu", False)]
    if select == "host":
        return [t for t in tests if not getattr(t, "needs_gpu", False)]
    return tests


def run_modules(names, select="all"):
    """Runs the tests of the modules named; returns (passed, failed, skipped)."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for name in names:
        module = importlib.import_module(name)
        for test in _tests_of(module, select):
            label = f"{os.path.basename(module.__file__)}::{test.__name__}"
            start = time.perf_counter()
            try:
                if getattr(test, "needs_gpu", False) and NO_GPU:
                    raise Skipped(NO_GPU)
                test()
            except Skipped as e:
                counts["skipped"] += 1
                print(f"SKIPPED {label}: {e}", flush=True)
                continue
            except Exception as e:  # a failed assert or an unexpected error
                counts["failed"] += 1
                print(f"FAILED {label}: {type(e).__name__}: {e}", flush=True)
                if not isinstance(e, AssertionError):
                    traceback.print_exc(file=sys.stdout)
                sys.stdout.flush()
                continue
            counts["passed"] += 1
            print(f"PASSED {label} ({time.perf_counter() - start:.2f} s)", flush=True)
    return counts["passed"], counts["failed"], counts["skipped"]

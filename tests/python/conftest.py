"""pytest's configuration for the Python binding's tests: the "gpu" marker
(tests that need torch with a CUDA device; harness.gpu applies it). Select
with -m gpu or -m "not gpu"; run_tests.py does that for CTest."""


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs torch with a CUDA device (skipped without)")

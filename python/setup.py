"""The binding's optional hot path in C, _tilejit_fast (tilejit_fast.c),
built beside the pure-Python module tilejit.py; pyproject.toml holds
everything else. It needs Python's headers and a C compiler; where either
is missing the build skips it (optional=True) and tilejit runs on ctypes
alone."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("_tilejit_fast", ["tilejit_fast.c"], optional=True)])

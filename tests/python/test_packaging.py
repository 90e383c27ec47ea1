"""Finding the library and installing the binding, with no GPU.

- The search order of tilejit._candidates (python/README.md documents it):
  TILEJIT_LIBRARY alone when set; else the build trees beside the module,
  the prefixes' lib/<multiarch>, lib64 and lib, the loader's own search by
  name, find_library; libtilejit.so.0 before libtilejit.so in each folder.
- A TILEJIT_LIBRARY that does not exist fails the import, naming it.
- pip install of python/ into a scratch venv, offline (this interpreter's
  pip and setuptools, no build isolation, no index): the installed module
  imports from outside the checkout, finds the library through
  TILEJIT_LIBRARY, and, without it, in the venv's own lib/ (sys.prefix);
  its version is the package's; pip builds the C hot path (_tilejit_fast)
  where Python's headers are, and the installed module loads it. Skipped where the interpreter has no
  setuptools able to build a wheel offline (>= 70.1, or >= 61 with the
  wheel package).
"""

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

import harness
from harness import skip

import tilejit

NAMES = ["libtilejit.so.0", "libtilejit.so"]


def candidates_without_env():
    """tilejit._candidates() as it runs with TILEJIT_LIBRARY unset."""
    saved = os.environ.pop("TILEJIT_LIBRARY", None)
    try:
        return list(tilejit._candidates())
    finally:
        if saved is not None:
            os.environ["TILEJIT_LIBRARY"] = saved


def test_search_order():
    paths = candidates_without_env()
    root = os.path.dirname(os.path.dirname(os.path.abspath(tilejit.__file__)))
    assert paths[:2] == [os.path.join(root, "build", name) for name in NAMES], paths[:2]
    for i in range(0, len(paths) - 1, 2):  # the soname first in every folder
        if os.sep in paths[i] and os.sep in paths[i + 1]:
            assert os.path.basename(paths[i]) == NAMES[0], paths[i]
            assert paths[i + 1] == os.path.join(os.path.dirname(paths[i]), NAMES[1]), paths[i + 1]
    prefix = [p for p in paths if p.startswith(os.path.join(sys.prefix, "lib"))]
    usr = paths.index(os.path.join("/usr", "lib", NAMES[0]))
    assert prefix and paths.index(prefix[0]) < usr, "sys.prefix is not searched before /usr"
    for libdir in ("lib64", "lib"):
        assert os.path.join(sys.prefix, libdir, NAMES[0]) in paths, f"no {libdir} under sys.prefix"
    bare = paths.index(NAMES[0])
    assert all(os.sep in p for p in paths[:bare]), "a bare name before the folders"
    assert paths[bare + 1] == NAMES[1]
    os.environ["TILEJIT_LIBRARY"], saved = "/some/where/libtilejit.so", os.environ.get(
        "TILEJIT_LIBRARY")
    try:
        assert list(tilejit._candidates()) == ["/some/where/libtilejit.so"]
    finally:
        if saved is None:
            del os.environ["TILEJIT_LIBRARY"]
        else:
            os.environ["TILEJIT_LIBRARY"] = saved


def test_missing_library_named():
    python_dir = os.path.dirname(os.path.abspath(tilejit.__file__))
    env = dict(os.environ, TILEJIT_LIBRARY="/nonexistent/libtilejit.so.0")
    done = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                           "import tilejit", python_dir], capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode != 0, "the import succeeded"
    assert "ImportError" in done.stderr and "/nonexistent/libtilejit.so.0" in done.stderr, \
        done.stderr[-1000:]


def offline_build_missing():
    """Why this interpreter cannot build the wheel offline, or None."""
    if importlib.util.find_spec("pip") is None:
        return "no pip"
    try:  # read from the metadata: importing setuptools here could disturb distutils
        found = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return "no setuptools"
    version = tuple(int(part) for part in found.split(".")[:2] if part.isdigit())
    if version < (61,):
        return f"setuptools {found} is older than 61"
    if version < (70, 1) and importlib.util.find_spec("wheel") is None:
        return f"setuptools {found} needs the wheel package to build a wheel"
    return None


def run(args, **kwargs):
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, **kwargs)
    assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done.stdout


def test_pip_install_offline():
    why = offline_build_missing()
    if why:
        skip(f"cannot build offline here: {why}")
    library = os.path.realpath(tilejit.library_path)
    source = os.path.join(harness.ROOT, "python")
    with tempfile.TemporaryDirectory() as tmp:
        # A copy of python/, so that the build leaves nothing in the checkout.
        src = os.path.join(tmp, "src")
        os.mkdir(src)
        for name in ("pyproject.toml", "setup.py", "tilejit.py", "tilejit_fast.c", "README.md"):
            shutil.copy(os.path.join(source, name), src)
        venv = os.path.join(tmp, "venv")
        run([sys.executable, "-m", "venv", "--without-pip", venv])
        python = os.path.join(venv, "bin", "python")
        site = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
        env = {k: v for k, v in os.environ.items()
               if k not in ("TILEJIT_LIBRARY", "PYTHONPATH", "LD_LIBRARY_PATH")}
        # This interpreter's pip builds the wheel with its own setuptools
        # (no isolation, no index: nothing is downloaded) into the venv.
        run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-index",
             "--no-deps", "--no-cache-dir", "--disable-pip-version-check", "-q",
             "--target", site.strip(), src], env=env, cwd=tmp)
        probe = ("import importlib.metadata, tilejit; print(tilejit.__file__); "
                 "print(tilejit.library_path); print(importlib.metadata.version('tilejit')); "
                 "print('.entry' in tilejit.dump_ptx(32)); print(tilejit._fast is not None)")
        lines = run([python, "-c", probe], env=dict(env, TILEJIT_LIBRARY=library),
                    cwd=tmp).split()
        assert lines[0].startswith(venv + os.sep), f"imported {lines[0]}, not the venv's copy"
        assert lines[1:4] == [library, tilejit.__version__, "True"], lines
        # The C hot path, built by pip where Python's headers are (CI: always).
        headers = os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
        if headers or os.environ.get("TJ_REQUIRE_PYTHON_EXT") == "1":
            assert lines[4] == "True", f"pip built no _tilejit_fast: {lines}"
        # Without TILEJIT_LIBRARY: the library in the venv's own lib/.
        shutil.copy(library, os.path.join(venv, "lib", "libtilejit.so.0"))
        lines = run([python, "-c", probe], env=env, cwd=tmp).split()
        found = os.path.realpath(lines[1])  # lib64 may be a link to lib
        assert found == os.path.realpath(os.path.join(venv, "lib", "libtilejit.so.0")), lines

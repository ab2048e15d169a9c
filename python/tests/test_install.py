"""``pip install ./python`` into a throwaway virtual environment, offline, and the installed
copy (not the source tree) talking to a real server.

Offline means the build backend must already be installed: setuptools (with wheel where
setuptools is older than 70.1, as Debian 12's 66 is: python3-setuptools, python3-wheel),
used through ``--no-build-isolation``, and no index (``--no-index``). The venv sees those
through ``--system-site-packages`` and is made ``--without-pip`` (the interpreter's own pip
installs into it), so neither ensurepip nor a download is needed. The interpreter running
the tests is tried first, then Debian's ``/usr/bin/python3``; without any that has venv, pip
and the backend the test is skipped, saying what is missing.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List, Optional, Tuple

import pytest
from serve_process import ADMIN_TOKEN

PACKAGE_ROOT = Path(__file__).resolve().parents[1]

# Whether an interpreter can build and install the package offline: prints what it lacks.
PROBE = """
import importlib.util, importlib.metadata
missing = [m for m in ("venv", "pip", "setuptools") if importlib.util.find_spec(m) is None]
if not missing:
    v = tuple(int(p) for p in importlib.metadata.version("setuptools").split(".")[:2])
    if v < (61, 0):
        missing.append("setuptools>=61")
    elif v < (70, 1) and importlib.util.find_spec("wheel") is None:
        missing.append("wheel (setuptools < 70.1 builds wheels with it)")
print(", ".join(missing))
"""


def clean_env() -> dict:
    """The environment without what points Python at the source tree."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def installer() -> Tuple[Optional[str], List[str]]:
    """An interpreter able to install offline, and why the others are not."""
    why = []
    for py in dict.fromkeys([sys.executable, "/usr/bin/python3"]):
        if not os.access(py, os.X_OK):
            continue
        out = subprocess.run([py, "-c", PROBE], capture_output=True, text=True, env=clean_env(),
                             timeout=60)
        missing = out.stdout.strip() if out.returncode == 0 else out.stderr.strip()[-200:]
        if not missing:
            return py, why
        why.append(f"{py}: lacks {missing}")
    return None, why


def test_pip_installs_the_package_into_a_venv_offline_and_it_works(tmp_path, server):
    py, why = installer()
    if py is None:
        pytest.skip("no interpreter can build offline (scripts/setup.sh installs python3-venv, "
                    "python3-pip, python3-setuptools, python3-wheel): " + "; ".join(why))
    # A copy: building writes build/ and *.egg-info beside the sources.
    src = tmp_path / "src"
    shutil.copytree(PACKAGE_ROOT, src, ignore=shutil.ignore_patterns(
        "tests", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache"))
    venv = tmp_path / "venv"
    env = clean_env()
    subprocess.run([py, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
                   check=True, env=env, timeout=120)
    vpy = str(venv / "bin" / "python")
    pip = subprocess.run([vpy, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                          "--no-deps", str(src)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert "Successfully installed tessera-client" in pip.stdout

    # The installed copy, from a directory where the sources are not importable.
    check = (
        "import importlib.metadata, sys, tessera\n"
        f"assert tessera.__file__.startswith({str(venv)!r}), tessera.__file__\n"
        "assert importlib.metadata.version('tessera-client') == tessera.__version__\n"
        "assert 'pandas' not in sys.modules\n"
        f"c = tessera.Client({server.addr!r}, {ADMIN_TOKEN!r})\n"
        "print(c.info()['server'], c.whoami().admin)\n")
    out = subprocess.run([vpy, "-c", check], capture_output=True, text=True, env=env,
                         cwd=str(tmp_path), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["serve", "True"]

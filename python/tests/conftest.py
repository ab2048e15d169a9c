"""Fixtures: one real ``tessera serve`` for the session, and a fresh tenant per test, so each
test sees only its own jobs and usage. A tenant's jobs are stopped when its test ends, so no
test leaves a job holding a GPU for the next one, and none outlives the server (a stopped
server leaves running jobs running, for the next start to adopt)."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Iterator

import pytest

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent  # python/: the source tree is tested, not an installed copy
REPO = PACKAGE_ROOT.parent
sys.path.insert(0, str(PACKAGE_ROOT))

from helpers import Tenant, make_tenant, stop_jobs  # noqa: E402
from serve_process import ADMIN_TOKEN, ServeProcess, find_binary, scratch_dir  # noqa: E402
from tessera import Client  # noqa: E402


@pytest.fixture(scope="session")
def tessera_bin() -> str:
    binary = find_binary(str(REPO))
    if not binary or not os.access(binary, os.X_OK):
        pytest.skip("no tessera binary: set TESSERA_BIN or build build/release")
    return binary


@pytest.fixture(scope="session")
def server(tessera_bin: str) -> Iterator[ServeProcess]:
    workdir = scratch_dir("serve")
    # A short checkpoint grace bounds how long a job that misses its SIGTERM holds on.
    proc = ServeProcess(tessera_bin, workdir, gpus=2, extra_args=["--checkpoint-grace", "5"])
    yield proc
    proc.stop()
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def admin(server: ServeProcess) -> Client:
    return Client(server.addr, ADMIN_TOKEN, timeout=20)


@pytest.fixture
def tenant(server: ServeProcess, admin: Client) -> Iterator[Tenant]:
    t = make_tenant(server.addr, admin)
    yield t
    stop_jobs(admin, t.name)


@pytest.fixture
def other_tenant(server: ServeProcess, admin: Client) -> Iterator[Tenant]:
    t = make_tenant(server.addr, admin, "other")
    yield t
    stop_jobs(admin, t.name)

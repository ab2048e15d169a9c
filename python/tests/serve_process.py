"""A real ``tessera serve`` for the tests, as tests/service_test_util.h starts one: on a free
port the server picks itself (``--listen 127.0.0.1:0 --addr-file``), with its database and
job directories in a scratch directory, and virtual GPUs so no driver is needed.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import List, Optional, Sequence

ADMIN_TOKEN = "python-client-test-admin"


def scratch_dir(tag: str) -> str:
    """A directory under the system's temp dir that jobs can pass through: a server running
    as root runs each tenant's jobs under a uid of its own, which must traverse every
    directory above its work directory (mkdtemp makes 0700)."""
    path = tempfile.mkdtemp(prefix=f"tessera-py-{tag}-")
    os.chmod(path, 0o711)
    return path


class ServeProcess:
    """``tessera serve`` running in the background until ``stop()``."""

    def __init__(self, binary: str, workdir: str, *, gpus: int = 2,
                 extra_args: Sequence[str] = (), scheme: str = "http") -> None:
        self.workdir = workdir
        self.scheme = scheme
        self._addr_file = os.path.join(workdir, "addr")
        self._log_path = os.path.join(workdir, "serve.log")
        args: List[str] = [binary, "serve", "--listen", "127.0.0.1:0",
                           "--addr-file", self._addr_file,
                           "--db", os.path.join(workdir, "tessera.db"),
                           "--virtual-gpus", str(gpus), *extra_args]
        env = dict(os.environ)
        env["TESSERA_ADMIN_TOKEN"] = ADMIN_TOKEN  # not on the command line
        self._log = open(self._log_path, "ab")
        self._proc: Optional[subprocess.Popen] = subprocess.Popen(
            args, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.addr = self._wait_for_address(20.0)

    def _wait_for_address(self, seconds: float) -> str:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(f"tessera serve exited ({self._proc.returncode}):\n{self.log()}")
            try:
                with open(self._addr_file, encoding="utf-8") as f:
                    addr = f.read().strip()
                if addr:
                    return addr
            except FileNotFoundError:
                pass
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"tessera serve did not listen within {seconds} s:\n{self.log()}")

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.addr}"

    def log(self) -> str:
        with open(self._log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self) -> None:
        """SIGTERM, as an operator stops it; SIGKILL if it has not exited in 10 s."""
        if self._proc is None:
            return
        self._proc.send_signal(signal.SIGTERM)
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._proc = None
        self._log.close()


def find_binary(repo: str) -> Optional[str]:
    """TESSERA_BIN (CTest passes the built binary), else the release build, else PATH."""
    given = os.environ.get("TESSERA_BIN")
    if given:
        return os.path.abspath(given)
    built = os.path.join(repo, "build", "release", "src", "tessera")
    if os.access(built, os.X_OK):
        return built
    return shutil.which("tessera")

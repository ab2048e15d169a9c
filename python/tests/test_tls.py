"""HTTPS: ``tessera serve --tls-cert --tls-key`` with a self-signed certificate made by the
openssl command, which the client verifies against a CA file (the certificate itself)."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from helpers import POLL, WAIT, stop_jobs
from serve_process import ADMIN_TOKEN, ServeProcess, scratch_dir

from tessera import Client, JobSpec, TesseraConnectionError


@pytest.fixture(scope="module")
def tls_server(tessera_bin):
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command (scripts/setup.sh installs it)")
    workdir = scratch_dir("tls")
    cert, key = os.path.join(workdir, "cert.pem"), os.path.join(workdir, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    os.chmod(key, 0o600)  # the server refuses a key others may read
    proc = ServeProcess(tessera_bin, workdir, gpus=1, scheme="https",
                        extra_args=["--tls-cert", cert, "--tls-key", key])
    proc.cert = cert
    yield proc
    stop_jobs(Client(proc.url, ADMIN_TOKEN, ca_file=cert), "tls-team")
    proc.stop()
    shutil.rmtree(workdir, ignore_errors=True)


def test_a_job_is_submitted_and_its_log_read_over_verified_https(tls_server):
    admin = Client(tls_server.url, ADMIN_TOKEN, ca_file=tls_server.cert)
    assert admin.info()["server"] == "serve"
    c = Client(tls_server.url, admin.create_tenant("tls-team"), ca_file=tls_server.cert)
    job = c.submit(JobSpec(name="secure", command=["echo", "over-tls"]))
    assert c.wait(job.id, interval=POLL, timeout=WAIT).state == "succeeded"
    assert c.logs(job.id) == "over-tls\n"


def test_a_certificate_that_does_not_verify_gets_no_answer(tls_server, monkeypatch):
    monkeypatch.delenv("TESSERA_CA", raising=False)
    with pytest.raises(TesseraConnectionError) as e:
        Client(tls_server.url, ADMIN_TOKEN).info()  # the system's CAs do not know it
    assert not e.value.retryable and "certificate" in str(e.value)
    # TESSERA_CA, as the CLI reads it.
    monkeypatch.setenv("TESSERA_CA", tls_server.cert)
    assert Client(tls_server.url, ADMIN_TOKEN).whoami().admin is True


def test_plain_http_to_the_tls_port_gets_no_answer(tls_server):
    with pytest.raises(TesseraConnectionError):
        Client(tls_server.addr, ADMIN_TOKEN, retries=0, timeout=5).info()

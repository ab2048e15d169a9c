#!/usr/bin/env python3
"""Runs every shell command block of the README as a user would, so the README cannot drift
from the program.

Each ```sh block runs on its own in `bash -e -o pipefail`, from a scratch directory laid out
like the checkout (deploy/, docs/, scripts/ and ../shared link to the real ones), with the
freshly built `tessera` first on PATH. A block fails the test if any of its commands fails or
it takes longer than --timeout seconds; whatever it started in the background is killed
afterwards. A block preceded by `<!-- readme-test: skip (WHY) -->` is not run (the set-up
blocks, which install packages and build). Blocks fenced without `sh` are usage synopses.

usage: readme_test.py --readme README.md --bin DIR_OF_TESSERA [--shared DIR] [--timeout S]
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = re.compile(r"<!--\s*readme-test:\s*skip\b")


def blocks(text):
    """(line number, code, skipped) for each ```sh block."""
    out = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```sh":
            start = i + 1
            j = start
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            previous = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            out.append((start, "\n".join(lines[start:j]), bool(SKIP.search(previous))))
            i = j + 1
        else:
            i += 1
    return out


def scratch_checkout(repo, shared):
    """A directory whose relative paths match the checkout's, where outputs may land."""
    root = tempfile.mkdtemp(prefix="tessera-readme-")
    work = os.path.join(root, "repo")
    os.mkdir(work)
    for name in ("deploy", "docs", "scripts", "fuzz", "tools"):
        if os.path.exists(os.path.join(repo, name)):
            os.symlink(os.path.join(repo, name), os.path.join(work, name))
    if shared and os.path.isdir(shared):
        os.symlink(os.path.abspath(shared), os.path.join(root, "shared"))
    return root, work


def run_block(code, cwd, env, timeout):
    # Output goes to a file, not a pipe: the servers a block leaves in the background hold
    # their stdout open after the block itself has ended.
    with tempfile.TemporaryFile(mode="w+") as log:
        proc = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", code], cwd=cwd, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            status = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            status = "timeout"
        finally:
            # The block's background servers share its process group.
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                time.sleep(0.3)
            proc.wait()
        log.seek(0)
        return status, log.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--readme", required=True)
    ap.add_argument("--bin", required=True, help="directory holding the built tessera")
    ap.add_argument("--shared", default="", help="the shared/ directory beside the checkout")
    ap.add_argument("--timeout", type=float, default=180)
    args = ap.parse_args()
    repo = os.path.dirname(os.path.abspath(args.readme))
    with open(args.readme) as f:
        found = blocks(f.read())
    if not found:
        print("no ```sh blocks in " + args.readme)
        return 1
    root, work = scratch_checkout(repo, args.shared)
    env = dict(os.environ)
    env["PATH"] = os.path.abspath(args.bin) + os.pathsep + env.get("PATH", "")
    for key in ("TESSERA_ADDR", "TESSERA_TOKEN"):
        env.pop(key, None)
    failures = 0
    for line, code, skipped in found:
        where = f"{args.readme}:{line}"
        if skipped:
            print(f"SKIP {where} (marked readme-test: skip)")
            continue
        if "kubectl" in code and shutil.which("kubectl", path=env["PATH"]) is None:
            print(f"SKIP {where} (no kubectl on this machine)")
            continue
        if "../shared/" in code and not os.path.isdir(os.path.join(root, "shared")):
            print(f"SKIP {where} (no ../shared data)")
            continue
        start = time.time()
        status, output = run_block(code, work, env, args.timeout)
        took = time.time() - start
        # A block runs clean: a warning of ours (a server told something will not work) fails
        # it as an error would.
        warned = [ln for ln in output.splitlines() if re.match(r"tessera[ \w-]*: warning:", ln)]
        if status == 0 and warned:
            status = "warned: " + warned[0]
        if status == 0:
            print(f"PASS {where} ({took:.1f} s)")
        else:
            failures += 1
            print(f"FAIL {where}: exit {status} after {took:.1f} s\n--- block:\n{code}\n"
                  f"--- output:\n{output}---")
    shutil.rmtree(root, ignore_errors=True)
    print(f"{failures} of {len(found)} blocks failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""Run a command with a throwaway PostgreSQL server on loopback (INSTANTSTART_TEST_PG_URL points at it).

Debian's `postgresql` package provides the binaries (the Makefile installs it when missing); the
cluster lives in a temporary directory and is removed afterwards. As root, the server runs as the
`postgres` user, since PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def find_bin(name: str) -> str:
    """The PostgreSQL binary `name`: on PATH, else the newest /usr/lib/postgresql/*/bin."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if not candidates:
        sys.exit(f"{name} not found: install Debian's postgresql package (make does this)")
    return candidates[-1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    if len(sys.argv) < 2:
        sys.exit("usage: with_postgres.py COMMAND [ARGS...]")
    root = os.geteuid() == 0
    workdir = tempfile.mkdtemp(prefix="instantstart-pg-")
    data = os.path.join(workdir, "data")
    prefix: list[str] = []
    if root:
        shutil.chown(workdir, user="postgres", group="postgres")
        os.chmod(workdir, 0o700)
        prefix = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    subprocess.run([*prefix, find_bin("initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8",
                    "--no-sync"], check=True, stdout=subprocess.DEVNULL, env=env)
    log = os.path.join(workdir, "server.log")
    subprocess.run([*prefix, find_bin("pg_ctl"), "-D", data, "-l", log, "-w", "-t", "60", "-o",
                    f"-h 127.0.0.1 -p {port} -k {workdir} -c fsync=off -c synchronous_commit=off "
                    "-c full_page_writes=off -c max_connections=300", "start"],
                   check=True, stdout=subprocess.DEVNULL, env=env)
    try:
        child_env = {**os.environ, "INSTANTSTART_TEST_PG_URL": f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"}
        print(f"throwaway PostgreSQL on 127.0.0.1:{port}", flush=True)
        return subprocess.call(sys.argv[1:], env=child_env)
    finally:
        subprocess.run([*prefix, find_bin("pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        time.sleep(0.2)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

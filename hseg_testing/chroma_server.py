"""A throwaway local Chroma server for integration tests, so they exercise the HTTP client path
that an in-process ``PersistentClient`` does not.

``chroma run --path DIR --host 127.0.0.1 --port N`` on a free port and a temporary directory,
readiness by polling the heartbeat endpoint for a bounded time, shutdown by signalling the PID we
started (never by process name).

Example:
    >>> with ChromaServer(tmp_path) as server:  # doctest: +SKIP
    ...     client = server.client()
    ...     client.heartbeat()
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["ChromaServer", "chroma_binary", "free_port"]

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"


def chroma_binary() -> str | None:
    """The ``chroma`` console script of this interpreter's environment, else the one on PATH."""
    local = Path(sys.executable).with_name("chroma")
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which("chroma")


def free_port(host: str = HOST) -> int:
    """A port the OS reports free right now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ChromaServer:
    """Start and stop one ``chroma run`` process.

    Args:
        path: data directory (created if needed); the server log goes to ``path/../<name>.log``.
        startup_timeout: seconds to wait for the heartbeat before giving up. Generous: the wait ends
            as soon as the server answers or its process exits, and a busy machine can take several
            times the ~2 s a start takes on a quiet one.
        attempts: tries with a fresh port if the server dies at startup (a port taken in between).
    """

    def __init__(self, path: str | Path, *, startup_timeout: float = 120.0, attempts: int = 3) -> None:
        self.path = Path(path)
        self.startup_timeout = startup_timeout
        self.attempts = attempts
        self.host = HOST
        self.port: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.path.parent / f"{self.path.name}-chroma.log"

    def start(self) -> ChromaServer:
        binary = chroma_binary()
        if binary is None:
            raise FileNotFoundError("the 'chroma' command is not installed (pip install chromadb)")
        self.path.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
        last_error = ""
        for _ in range(self.attempts):
            self.port = free_port(self.host)
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(
                    [binary, "run", "--path", str(self.path), "--host", self.host, "--port", str(self.port)],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                )
            if self._wait_ready():
                logger.info("chroma server pid %d ready on %s:%d", self.proc.pid, self.host, self.port)
                return self
            last_error = self._log_tail()
            self.stop()
        raise RuntimeError(f"chroma run did not become ready in {self.startup_timeout:.0f} s:\n{last_error}")

    def _wait_ready(self) -> bool:
        assert self.proc is not None
        url = f"http://{self.host}:{self.port}/api/v2/heartbeat"
        # bounded: until startup_timeout has passed, and stop early if the process died
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(url, timeout=1.0) as resp:
                    if resp.status == 200:
                        return True
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.1)
        return False

    def _log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def client(self) -> Any:
        """A ``chromadb.HttpClient`` for this server."""
        import chromadb

        assert self.port is not None, "the server is not started"
        return chromadb.HttpClient(host=self.host, port=self.port)

    def stop(self) -> None:
        """SIGTERM the server we started (by PID), SIGKILL if it does not exit in 20 s."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def __enter__(self) -> ChromaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

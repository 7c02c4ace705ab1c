"""A command run as a person runs it at a terminal: stdin, stdout and stderr on a pseudo-terminal (pty), the
output read back as text (rich's styles and the terminal's \\r\\n undone). `ol check CHAPTER` with no
submission shows the demo only there."""

import os
import pty
import re
import select
import subprocess
import time

SGR = re.compile(r"\x1b\[[0-9;]*m")  # rich's styles; any other escape sequence stays in the text


def at_a_terminal(argv: list[str], cwd, env: dict | None = None, timeout: float = 600) -> tuple[int, str]:
    """(exit code, everything the command wrote to the terminal, its styles removed)."""
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(argv, cwd=cwd, stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                             env={**os.environ, "COLUMNS": "200", **(env or {})})
    finally:
        os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                p.kill()
                raise subprocess.TimeoutExpired(argv, timeout)
            if not select.select([master], [], [], min(left, 1.0))[0]:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal has closed it
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    code = p.wait(timeout=60)
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    return code, SGR.sub("", text)

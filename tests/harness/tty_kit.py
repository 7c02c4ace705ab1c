"""A command run as a person runs it at a terminal: stdin, stdout and stderr on a pseudo-terminal (pty), the
output read back as text (rich's styles and the terminal's \\r\\n undone). `ol check CHAPTER` with no
submission shows the demo only there.

`at_a_pty` is the whole of it: the command in its own session whose controlling terminal is the pty, sized as
asked (rows x columns, as a terminal window is), the raw bytes it wrote; `interrupt_on`: once that text has
appeared, Ctrl-C is typed (the byte 0x03, which the terminal turns into SIGINT for its foreground process group,
as a person's Ctrl-C is)."""

import fcntl
import os
import pty
import signal
import re
import select
import struct
import subprocess
import termios
import time

SGR = re.compile(r"\x1b\[[0-9;]*m")  # rich's styles; any other escape sequence stays in the text
CTRL_C = b"\x03"
SIGNAL_STATE: dict[int | str, str] = {}  # pid -> its threads' signal masks as Ctrl-C was typed (for a failure's message)


def signal_state(pid: int) -> str:
    """Each thread of `pid`: its pending, blocked, ignored and caught signal masks (/proc), and the terminal's
    foreground group: what a Ctrl-C that nobody heard needs explained."""
    lines = []
    try:
        lines.append(f"pgrp {os.getpgid(pid)}, terminal's foreground group {open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[5]}")
        for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
            fields = dict(line.split(":", 1) for line in open(f"/proc/{pid}/task/{tid}/status").read().splitlines() if ":" in line)
            lines.append(f"{tid} {fields['Name'].strip()} " + " ".join(f"{k}={fields[k].strip()}" for k in
                                                                        ("State", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")))
    except OSError as e:
        lines.append(f"({e})")
    return "\n".join(lines)


def _controlling_terminal() -> None:
    """In the child, after setsid: its stdin (the pty) becomes the session's controlling terminal, and Ctrl-C and
    Ctrl-\\ do what they do at a person's terminal: a suite started in the background of a script (`cmd &`, nohup)
    hands its children SIGINT and SIGQUIT ignored, and an interpreter started so never hears a Ctrl-C."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)


def _started(argv: list[str], cwd, env: dict, columns: int = 200, rows: int = 50) -> tuple[subprocess.Popen, int]:
    """`argv` in its own session whose controlling terminal is a new pty, sized rows x columns; (it, the pty's master)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    try:
        p = subprocess.Popen(argv, cwd=cwd, stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                             start_new_session=True, preexec_fn=_controlling_terminal,
                             env={**os.environ, "COLUMNS": str(columns), "LINES": str(rows), **env})
    finally:
        os.close(slave)
    return p, master


def _followed(p: subprocess.Popen, master: int, timeout: float, step) -> bytes:
    """Everything written to the terminal until every writer has closed it (its session killed and TimeoutExpired
    after `timeout` s); `step(chunks)` runs before each wait for output (at most 0.2 s apart): it may type."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.killpg(p.pid, 9)
                raise subprocess.TimeoutExpired(p.args, timeout)
            step(chunks)
            if not select.select([master], [], [], min(left, 0.2))[0]:
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
    return b"".join(chunks)


def at_a_pty(argv: list[str], cwd, env: dict | None = None, timeout: float = 600, columns: int = 200, rows: int = 50,
             interrupt_on: bytes | None = None, interrupt_after: float | None = None) -> tuple[int, bytes, bool]:
    """(exit code, the raw bytes the command wrote to the terminal, whether Ctrl-C was typed); `interrupt_after`:
    Ctrl-C that many seconds after the start (a command that prints nothing before its end)."""
    p, master = _started(argv, cwd, env or {}, columns, rows)
    started, typed = time.monotonic(), []

    def type_ctrl_c(chunks: list[bytes]) -> None:
        due = (interrupt_after is not None and time.monotonic() - started >= interrupt_after
               or interrupt_on is not None and interrupt_on in b"".join(chunks))
        if due and not typed:
            os.write(master, CTRL_C)
            typed.append(True)
            SIGNAL_STATE[p.pid] = signal_state(p.pid)

    raw = _followed(p, master, timeout, type_ctrl_c)
    code = p.wait(timeout=60)
    SIGNAL_STATE["last"] = SIGNAL_STATE.pop(p.pid, "")
    return code, raw, bool(typed)


def text_of(raw: bytes) -> str:
    return SGR.sub("", raw.decode("utf-8", "replace").replace("\r\n", "\n"))


def at_a_terminal(argv: list[str], cwd, env: dict | None = None, timeout: float = 600) -> tuple[int, str]:
    """(exit code, everything the command wrote to the terminal, its styles removed)."""
    code, raw, _ = at_a_pty(argv, cwd, env, timeout)
    return code, text_of(raw)


CTRL_Z = b"\x1a"


def suspended_at_a_shell(line: str, cwd, env: dict, suspend_on: bytes, suspend_s: float,
                         timeout: float = 600) -> tuple[int | None, bytes, bool]:
    """`line` typed into an interactive bash at a pty (job control on: the command is the terminal's foreground
    group, as at a person's terminal); once `suspend_on` has appeared, Ctrl-Z is typed (the terminal sends SIGTSTP
    to that group and bash says "Stopped"), `fg` typed `suspend_s` seconds later. (the command's exit code, read
    from bash after it, or None; the raw bytes; whether Ctrl-Z was typed.)"""
    p, master = _started(["bash", "--norc", "--noprofile", "-i"], cwd, {"PS1": "$ ", **env})
    os.write(master, line.encode() + b"\n")
    resume_at: list[float] = []

    def suspend_then_resume(chunks: list[bytes]) -> None:
        if not resume_at and suspend_on in b"".join(chunks):
            os.write(master, CTRL_Z)
            resume_at.append(time.monotonic() + suspend_s)
        elif len(resume_at) == 1 and time.monotonic() >= resume_at[0]:
            os.write(master, b"fg\n")
            os.write(master, b"echo OL_EXIT=$?; exit\n")  # read by bash once the resumed command ends
            resume_at.append(0.0)

    raw = _followed(p, master, timeout, suspend_then_resume)
    p.wait(timeout=60)
    found = re.findall(rb"OL_EXIT=(\d+)", raw)
    return (int(found[-1]) if found and len(resume_at) == 2 else None), raw, bool(resume_at)

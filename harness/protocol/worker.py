"""The in-interpreter worker (ol's own language's): runs a submission's code in its own process and answers spec/protocol.md.

    -m harness.protocol.worker --ops PACK/ops.py --package PKG --package-dir DIR [--own FILE ...] --in FD --out FD

DIR holds the submission's package; PACK/ops.py is the chapter's op table, loaded by path (the
worker needs nothing else of the chapter). The worker talks JSON lines on the two inherited file
descriptors only; the submission's prints go to the process's stdout/stderr, which the judge
captures apart. It computes and returns plain data; it never sees an expected answer.
"""

import argparse
import os
import sys
from collections.abc import Iterator

# the harness and the ops are imported before the submission is on sys.path (main), so it cannot shadow them
from .session import PROTOCOL_VERSION, Session, load_module
from .wire import dumps, loads, read_some


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", required=True)
    ap.add_argument("--package", required=True, help="the package the submission holds (its chapter's language table says)")
    ap.add_argument("--package-dir", required=True)
    ap.add_argument("--own", action="append", default=[], help="a student's file (relative): failures show its frames")
    ap.add_argument("--in", dest="fd_in", type=int, required=True)
    ap.add_argument("--out", dest="fd_out", type=int, required=True)
    a = ap.parse_args()
    ops = load_module(a.ops, "ol_chapter_ops")  # the chapter's ops, too, before the submission is on sys.path

    sys.path.insert(0, a.package_dir)
    inbox = _lines(a.fd_in)
    outbox = os.fdopen(a.fd_out, "wb", buffering=0)

    def send(msg) -> None:
        outbox.write(dumps(msg))

    def receive():
        line = next(inbox, b"")
        if not line:
            os._exit(0)  # the judge went away
        return loads(line)

    callbacks = iter(range(1, 1 << 62))

    def call_judge(method: str, args: dict):
        cid = f"c{next(callbacks)}"
        send({"id": cid, "call": method, "args": args})
        reply = receive()
        if "error" in reply:
            raise JudgeRefused(reply["error"].get("message", "the judge refused the call"))
        return reply.get("ok")

    session = Session(a.package, call_judge, ops, a.package_dir, tuple(a.own))
    send({"hello": {"protocol": PROTOCOL_VERSION, "pid": os.getpid(), "batch": True}})
    while True:
        msg = receive()
        for request in msg["batch"] if isinstance(msg.get("batch"), list) else [msg]:  # a batch: each in turn
            try:
                send({"id": request["id"], "ok": session.dispatch(request["op"], request.get("args", {}))})
            except BaseException as e:  # noqa: BLE001 -- SystemExit and KeyboardInterrupt too: all become data
                send({"id": request.get("id"), "error": session.error_data(e)})


def _lines(fd: int) -> Iterator[bytes]:
    """Lines from the judge's descriptor, read as harness.protocol.wire.read_some reads (polling briefly first),
    until its end."""
    os.set_blocking(fd, False)
    buf = bytearray()
    while True:
        while (end := buf.find(b"\n")) < 0:
            chunk = read_some(fd)
            if not chunk:
                return
            buf += chunk
        yield bytes(buf[:end + 1])
        del buf[:end + 1]


class JudgeRefused(RuntimeError):
    """The judge refused a callback (e.g. the target was misused); raised into the submission's code."""


if __name__ == "__main__":
    main()

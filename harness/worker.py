"""The worker: runs a submission's code in its own process and answers spec/protocol.md.

    python -m harness.worker --package-dir DIR --in FD --out FD

DIR holds the submission's `tinyllm/` package. The worker talks JSON lines on the two inherited
file descriptors only; the submission's prints go to the process's stdout/stderr, which the judge
captures apart. It computes and returns plain data; it never sees an expected answer.
"""

import argparse
import os
import sys


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--package-dir", required=True)
    ap.add_argument("--in", dest="fd_in", type=int, required=True)
    ap.add_argument("--out", dest="fd_out", type=int, required=True)
    a = ap.parse_args()
    from harness import ops  # before the submission is on sys.path, so it cannot shadow the harness
    from harness.wire import dumps, loads

    sys.path.insert(0, a.package_dir)
    inbox = os.fdopen(a.fd_in, "rb")
    outbox = os.fdopen(a.fd_out, "wb", buffering=0)

    def send(msg) -> None:
        outbox.write(dumps(msg))

    def receive():
        line = inbox.readline()
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

    session = ops.Session("tinyllm", call_judge)
    send({"hello": {"protocol": ops.PROTOCOL_VERSION, "pid": os.getpid()}})
    while True:
        msg = receive()
        try:
            send({"id": msg["id"], "ok": ops.dispatch(session, msg["op"], msg.get("args", {}))})
        except BaseException as e:  # noqa: BLE001 -- SystemExit and KeyboardInterrupt too: all become data
            send({"id": msg.get("id"), "error": ops.error_data(e, session)})


class JudgeRefused(RuntimeError):
    """The judge refused a callback (e.g. the target was misused); raised into the submission's code."""


if __name__ == "__main__":
    main()

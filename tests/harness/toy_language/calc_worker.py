"""The calc worker (calc.py's): spec/protocol.md version 1 over `--in FD --out FD`, framed by harness.protocol.wire.

    python calc_worker.py --program program.json --ops ops.json --in FD --out FD

It says hello, answers `load` with null, and each op of the pack's table (ops.json: op -> the argument that is x)
with the compiled program's value at that x; anything else is an error answer (KeyError, as the Python worker's).
"""

import argparse
import json
import operator
import os

from harness.protocol.wire import dumps, loads, read_some

APPLY = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def run(program: list, x: int) -> int:
    stack = []
    for item in program:
        if item[0] == "op":
            right, left = stack.pop(), stack.pop()
            stack.append(APPLY[item[1]](left, right))
        else:
            stack.append(x if item[0] == "x" else item[1])
    return stack[0]


def answer(msg: dict, program: list, ops: dict):
    op, args = msg["op"], msg.get("args", {})
    if op == "load":
        return None
    if op not in ops:
        raise KeyError(f"unknown operation {op!r}; the protocol has {sorted(ops)}")
    return run(program, args[ops[op]])


def main() -> None:
    ap = argparse.ArgumentParser()
    for flag in ("--program", "--ops"):
        ap.add_argument(flag, required=True)
    ap.add_argument("--in", dest="fd_in", type=int, required=True)
    ap.add_argument("--out", dest="fd_out", type=int, required=True)
    a = ap.parse_args()
    with open(a.program) as f:
        program = json.load(f)
    with open(a.ops) as f:
        ops = json.load(f)
    os.set_blocking(a.fd_in, False)
    buf = bytearray()
    os.write(a.fd_out, dumps({"hello": {"protocol": 1, "pid": os.getpid()}}))
    while True:
        while (end := buf.find(b"\n")) < 0:
            chunk = read_some(a.fd_in)
            if not chunk:
                return  # the judge went away
            buf += chunk
        msg = loads(bytes(buf[:end + 1]))
        del buf[:end + 1]
        try:
            reply = {"id": msg["id"], "ok": answer(msg, program, ops)}
        except Exception as e:  # noqa: BLE001 -- every failure is an answer
            reply = {"id": msg.get("id"), "error": {"type": type(e).__name__, "message": str(e), "spec_error": False,
                                                    "traceback": "", "frames": []}}
        os.write(a.fd_out, dumps(reply))


if __name__ == "__main__":
    main()

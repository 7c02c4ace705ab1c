"""What the uid-fallback tests share: a private mount namespace in which an unprivileged uid can reach
this interpreter, its venv and the checkout, as it can in a Gradescope image (/usr/bin/python3, /autograder).

This machine keeps them where other uids cannot go (a pyenv under /root, a clone under a 0700 mktemp
folder). The namespace lays a traversable tmpfs over each such folder, holding binds of the original
children on the path, so the same paths resolve to the same files; nothing of the host changes (the
staging binds live on a tmpfs over /mnt, in that namespace only).
"""

import os
import shlex
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _blocked(paths: list[Path]) -> dict[Path, set[str]]:
    """Each folder on the paths that others cannot traverse -> the children on the paths below it, top-down."""
    out: dict[Path, set[str]] = {}
    for p in paths:
        p = Path(os.path.realpath(p))
        for parent, child in zip(reversed(p.parents), [*reversed(p.parents)][1:] + [p]):
            if not os.stat(parent).st_mode & 0o001:
                out.setdefault(parent, set()).add(child.name)
    return dict(sorted(out.items(), key=lambda kv: len(kv[0].parts)))


def prelude(paths: list[Path] | None = None) -> str:
    """Shell that, run as root in a private mount namespace, makes `paths` (default: the interpreter, its
    venv and the checkout) reachable by any uid."""
    paths = paths or [Path(os.path.realpath(sys.executable)), Path(sys.prefix), REPO]
    lines = ["set -e", "mount -t tmpfs -o mode=0755,size=1m ol-uid-stage /mnt"]
    for i, (folder, children) in enumerate(_blocked(paths).items()):
        q = shlex.quote(str(folder))
        lines += [f"mkdir /mnt/{i}", f"mount --bind {q} /mnt/{i}", f"mount -t tmpfs -o mode=0755,size=1m ol-uid-{i} {q}"]
        for c in sorted(children):
            lines += [f"mkdir {q}/{shlex.quote(c)}", f"mount --bind /mnt/{i}/{shlex.quote(c)} {q}/{shlex.quote(c)}"]
    return "\n".join(lines) + "\n"


def namespace() -> list[str]:
    """The argv prefix that runs a command in such a namespace (skips where the uid fallback cannot run)."""
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("unshare", "setpriv", "mount")):
        pytest.skip("the uid fallback needs root, unshare, setpriv and mount (util-linux)")
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", prelude() + 'exec "$@"', "ol-uid-test"]


def hidden(trees: list[Path]) -> str:
    """Shell (after `prelude`, in the same namespace) that makes each folder of `trees` private as a grader's
    answer trees are (chmod -R go-rwx), without changing the host: a 0700 tmpfs over it holding binds of its
    children, so root reads the same files at the same paths and no other uid can enter."""
    lines = []
    for i, tree in enumerate(trees):
        q = shlex.quote(str(tree))
        lines += [f"mkdir /mnt/h{i}", f"mount --bind {q} /mnt/h{i}", f"mount -t tmpfs -o mode=0700,size=1m ol-hide-{i} {q}"]
        for child in sorted(os.listdir(tree)):
            c = shlex.quote(child)
            lines += [f"{'mkdir' if (tree / child).is_dir() else 'touch'} {q}/{c}", f"mount --bind /mnt/h{i}/{c} {q}/{c}"]
    return "\n".join(lines) + "\n"


def namespace_with_answers_hidden(trees: list[Path]) -> list[str]:
    """`namespace()`, with `trees` private (hidden) in it: what `ol grade` in mode uid asks of a grading machine."""
    namespace()  # skips where the uid fallback cannot run
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", prelude() + hidden(trees) + 'exec "$@"',
            "ol-uid-test"]

"""A class for `ol similar`'s tests: honest submissions written independently (three styles a language, in
similar_samples/: each file holds the bodies of seven or six of the contract's functions, written apart from
one another and from the reference), put into the stub `ol start` writes, as a student fills it in; and a
planted copy: one honest submission with every identifier of its own renamed and comments added.

The examples/submissions samples are not used as honest submissions: each is the reference with one bug,
so they are copies of one another (copydetect scores every pair of them above 96 %)."""

import re
from pathlib import Path

from harness.kernel.paths import REPO
from harness.registry import load_chapter
from harness.languages.stub import make_stub

SAMPLES = Path(__file__).resolve().parent / "similar_samples"
CH = load_chapter("L10.8")

PY_RENAMES = {"tokens": "ids", "size": "total_len", "tail": "suffix_ids", "start": "i0", "end": "stop", "history": "ext",
              "out": "drafted", "picked": "choice", "order": "m", "key": "pattern", "tally": "counts", "pos": "j",
              "follower": "nxt", "best": "top_count", "pa": "pv", "qa": "qv", "diff": "excess", "total": "mass",
              "probs": "weights", "ratio": "acc_ratio", "fixed": "res", "wanted": "need", "freed": "released", "last": "blk"}
RS_RENAMES = {"t": "len_ctx", "tail": "suffix_ids", "start": "i0", "end": "stop", "history": "ext", "out": "drafted",
              "picked": "choice", "order": "m", "key": "pattern", "tally": "counts", "pos": "j", "best": "top_count",
              "tok": "token", "diff": "excess", "total": "mass", "acc": "running", "last": "found", "size": "bsz",
              "wanted": "need", "freed": "released", "fill": "filled"}
PY_COMMENTS = ["# my approach: walk back from the end", "# count how often each token follows", "# normalise the leftover mass",
               "# accept or resample", "# ceil division", "# free the blocks past keep"]
RS_COMMENTS = ["// search longest first", "// tally the followers", "// leftover mass, normalised", "// walk the cdf",
               "// round up", "// give the blocks back"]


def bodies(path: Path) -> dict[str, str]:
    """name -> body, from a samples file of sections headed `# def NAME` (Python) or `// fn NAME` (Rust)."""
    parts = re.split(r"^(?:# def|// fn) (\w+)\n", path.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def fill(stub: str, found: dict[str, str], lang: str) -> str:
    """The stub with each named function's placeholder line replaced by its body, indented as the line is."""
    for name, body in found.items():
        marker = (rf'^( *)raise NotImplementedError\("{name}: not implemented yet"\)\n' if lang == "python"
                  else rf'^( *)todo!\("{name}"\)\n')
        m = re.search(marker, stub, flags=re.M)
        assert m, f"no placeholder for {name}"
        text = "".join(m.group(1) + line if line.strip() else line for line in body.splitlines(keepends=True))
        stub = stub[:m.start()] + text + stub[m.end():]
    return stub


def disguised(found: dict[str, str], renames: dict[str, str], comments: list[str]) -> dict[str, str]:
    """The same bodies, each identifier of `renames` renamed, a comment added at the top of each, blank lines added."""
    out = {}
    for i, (name, body) in enumerate(found.items()):
        for old, new in renames.items():
            body = re.sub(rf"\b{old}\b", new, body)
        out[name] = f"{comments[i % len(comments)]}\n" + body.replace("\n    return", "\n\n    return")
    return out


def stub(lang: str) -> str:
    return make_stub(CH, "python") if lang == "python" else (REPO / "spec" / "rust" / "spec.rs").read_text()


def write_class(root: Path, planted: bool = True) -> Path:
    """root/class: py-a, py-b, py-c, rs-a, rs-b, rs-c (honest), and, when `planted`, py-copy (py-a disguised)
    and rs-copy (rs-a disguised); each a folder holding its bare spec.py or spec.rs."""
    klass = root / "class"
    for lang, ext, renames, comments in (("python", "py", PY_RENAMES, PY_COMMENTS), ("rust", "rs", RS_RENAMES, RS_COMMENTS)):
        upload = "spec.py" if lang == "python" else "spec.rs"
        for style in "abc":
            (klass / f"{ext}-{style}").mkdir(parents=True)
            (klass / f"{ext}-{style}" / upload).write_text(fill(stub(lang), bodies(SAMPLES / f"{ext}_{style}.{ext}"), lang))
        if planted:
            (klass / f"{ext}-copy").mkdir(parents=True)
            copy = disguised(bodies(SAMPLES / f"{ext}_a.{ext}"), renames, comments)
            (klass / f"{ext}-copy" / upload).write_text(fill(stub(lang), copy, lang))
    return klass

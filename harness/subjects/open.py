"""Open the implementation under test: `reference`, `mutant:ID`, or a submission (any layout).

The reference and mutants are trusted and run in-process (a mutant: the reference copied, patched and loaded under
a name of its own, once per process); `transport="worker"` sends them through a worker too. A submission always
runs in a worker of its language. Every scratch copy is removed (a worker's when its Impl closes).
"""

import importlib
import pkgutil
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..kernel.errors import RegistryError, SubmissionFailure, UsageError
from ..languages import in_process, language
from ..registry import Chapter
from ..sandbox.confine import Mode, choose, own_folder
from ..transport.impl import Impl
from ..transport.inprocess import InProcess
from ..transport.worker_client import Unbuilt, WorkerTransport
from .layout import Submission, detect
from .reference import copy_reference, load_package, use_reference  # copy_reference: re-exported, as before


def _scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="ol-impl-"))


def materialize_mutant(chapter: Chapter, mid: str, into: Path, lang: str | None = None) -> Path:
    """The reference of `lang` (default: ol's own) copied to `into/`, the mutant's patch for it applied."""
    lang = lang or in_process().name
    m = chapter.mutant(mid)
    patch = chapter.patch_of(m, lang)
    if patch is None:
        have = ", ".join(x.id for x in chapter.mutants if lang in x.patches) or "none"
        raise UsageError(f"mutant {mid} has no {lang} port (the {lang} mutants of {chapter.chapter}: {have})")
    if not patch.is_file():
        raise RegistryError(f"mutant {mid}: its patch {patch} is missing")
    copy_reference(chapter, into, lang)
    r = subprocess.run(["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch", "-s", "-d", str(into), "-i", str(patch)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RegistryError(f"mutant {mid}: {patch.name} does not apply to the {lang} reference:\n{r.stdout}{r.stderr}")
    return into


def with_reference_deps(chapter: Chapter, sub: Submission, into: Path) -> Path:
    """The reference package with the submission's own chapter files in place of the reference's."""
    spec = chapter.language(sub.language)
    copy_reference(chapter, into, sub.language)
    for rel in spec.student_files:
        if (sub.root / rel).is_file():
            shutil.copyfile(sub.root / rel, into / rel)
    return into


def _client(chapter: Chapter):
    return getattr(chapter.module("client"), chapter.client_class)


def _in_process_mutant(chapter: Chapter, mid: str) -> str:
    alias = f"ol_mutant_{chapter.pack_dir.name}_{mid}"
    if alias not in sys.modules:  # one patched copy per mutant per process, all imported, then removed
        with tempfile.TemporaryDirectory(prefix="ol-impl-", ignore_cleanup_errors=True) as made:
            into = materialize_mutant(chapter, mid, Path(made))
            package = load_package(into / chapter.language(in_process().name).package, alias)
            for m in pkgutil.walk_packages(package.__path__, f"{alias}."):
                importlib.import_module(m.name)
    return alias


def _over_worker(chapter: Chapter, lang: str, package_dir: Path, label: str, scratch: Path | None = None,
                 sandbox: Mode | None = None) -> Impl:
    """The chapter's client over a confined worker of `lang` serving package_dir, built first (confined too) when the
    language builds; the scratch goes when the Impl closes. A failed build is data: every call fails with it, as
    for a submission that does not load. `sandbox`: the mode (default harness.sandbox.confine.choose())."""
    spec = language(lang)
    mode = sandbox or choose()
    impl = _client(chapter)(None, label, scratch=scratch)
    source_root = Path(package_dir)
    if spec.build is not None:
        build_dir = own_folder(_scratch(), mode)  # mode uid: 0710 root:the worker's gid before the crate lands in it
        impl.adopt(build_dir)
        try:
            package_dir = spec.build(chapter, Path(package_dir), build_dir, mode)
        except SubmissionFailure as e:
            impl.transport = Unbuilt(e, mode, lang)
            return impl
        except BaseException:  # the judge's own failure (a sandbox that cannot start): its scratch goes, the error stands
            for path in impl.scratch:
                shutil.rmtree(path, ignore_errors=True)
            raise
    impl.transport = WorkerTransport(lambda home: spec.worker(chapter, package_dir, home), mode,
                                     language=lang, source_root=source_root, words=spec.words)
    return impl


def validate(chapter: Chapter, subject: str, language_name: str | None = None) -> None:
    """Refuse a subject that cannot be opened (an unknown mutant, no submission) before any test runs."""
    if subject == "reference":
        return
    if subject.startswith("mutant:"):
        chapter.mutant(subject.split(":", 1)[1])
        return
    detect(chapter, subject, language_name).close()


def open_impl(chapter: Chapter, subject: str, ref_deps: bool = False, transport: str = "auto",
              language_name: str | None = None, sandbox: Mode | None = None) -> Impl:
    """An Impl for `subject`: "reference", "mutant:ID", or a submission's path. `sandbox`: how a worker is
    confined (default: the best mode here, harness.sandbox.confine.choose); trusted code in-process is not."""
    Client = _client(chapter)
    ops = chapter.module("ops")
    own = in_process().name  # the language whose trusted code can run in this process
    lang = language_name or own
    worker = f"({lang} worker)" if lang != own else "(worker)"  # trusted code through a worker: its label's end
    if subject == "reference":
        if transport == "worker" or lang != own:
            into = copy_reference(chapter, _scratch(), lang)
            return _over_worker(chapter, lang, into, f"reference {worker}", scratch=into, sandbox=sandbox)
        spec = chapter.language(own)
        use_reference(spec.reference)
        importlib.import_module(spec.package)
        return Client(InProcess(spec.package, ops), "reference")
    if subject.startswith("mutant:"):
        mid = subject.split(":", 1)[1]
        chapter.mutant(mid)  # an unknown id is a usage error, before anything is copied
        if transport == "worker" or lang != own:
            into = materialize_mutant(chapter, mid, _scratch(), lang)
            return _over_worker(chapter, lang, into, f"mutant {mid} {worker}", scratch=into, sandbox=sandbox)
        return Client(InProcess(_in_process_mutant(chapter, mid), ops), f"mutant {mid}")
    # a submission: in a worker of its language (a bare file: the rest from the reference)
    sub = detect(chapter, subject, language_name)
    try:
        if ref_deps or sub.bare:
            how = "--ref-deps" if ref_deps else f"{sub.layout}: earlier chapters from the reference"
            into = with_reference_deps(chapter, sub, _scratch())
            impl = _over_worker(chapter, sub.language, into, f"{sub.origin} ({how})", scratch=into, sandbox=sandbox)
        else:
            impl = _over_worker(chapter, sub.language, sub.root, str(sub.origin), sandbox=sandbox)
    except BaseException:
        sub.close()
        raise
    if sub.scratch is not None:  # a bare file's or an archive's scratch goes when the Impl closes
        impl.adopt(sub.scratch)
    return impl

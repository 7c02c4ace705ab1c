"""`ol start`: a chapter's workspace written for the student (the language's hook, harness.languages), never over
ol's own files, never over the student's work without a dated copy kept."""

import shutil
import time
from pathlib import Path

import click

from ..kernel.errors import UsageError
from ..languages import LANGUAGES, language
from ..kernel.paths import REPO, own_files_under
from ..registry import defaults, load_chapter
from .common import out

DEFAULTS = defaults()  # chapter -> (its own language, {language: its default workspace}), from the packs' tables


def _start_help() -> str:
    """`ol start`'s help: where it writes, for each chapter's own language and with --lang for the others."""
    own = {lang: spaces[lang] for lang, spaces in DEFAULTS.values()}
    others = {n: ws for _, spaces in DEFAULTS.values() for n, ws in spaces.items() if n not in own}
    where = [f"./{ws} for a {n.capitalize()} chapter" for n, ws in own.items()] + [f"./{ws} with --lang {n}" for n, ws in others.items()]
    return f"Write the stub of the chapter's file into WORKSPACE (default {', '.join(where)})."


@click.command(help=_start_help())
@click.argument("chapter")
@click.argument("workspace", required=False, type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="replace your chapter file with the stub (a dated copy of yours is kept beside it)")
@click.option("--lang", default=None, metavar="LANG",
              help="the language you write the chapter in (default: the chapter's own, "
                   f"{', '.join(f'{lang} for {name}' for name, (lang, _) in DEFAULTS.items())}; "
                   f"or {' or '.join(n for n in LANGUAGES if all(n != lang for lang, _ in DEFAULTS.values()))})")
def start(chapter: str, workspace: Path | None, force: bool, lang: str | None) -> None:
    ch = load_chapter(chapter)
    lang = lang or ch.default_language
    spec = ch.language(lang)  # an unknown language: a usage error naming the chapter's
    ws = workspace or Path(spec.default_workspace)
    _refuse_own_files(ch, ws, spec.default_workspace)
    mine = ws / spec.student_file
    if mine.is_file() and not force:
        raise UsageError(f"{mine} already exists; ol start does not overwrite your work." + _repoint(ws) +
                         " To start over from the stub: --force (your file is kept beside it, dated)")
    kept = _keep_copy(mine) if force else None
    flags = "" if ws.resolve() == Path(spec.default_workspace).resolve() else f" --submission {ws}"
    if (write := language(lang).start) is None:
        raise UsageError(f"ol start cannot write a {lang} workspace: its language gives no stub; write {spec.student_file} yourself")
    for line in write(ch, lang, ws, force, flags, str(REPO / "docs" / "student.md")):
        out.print(line, markup=False)
    if kept is not None:
        out.print(f"kept your previous {mine.name} as {kept} (--force replaced it with the stub)", markup=False)


def _refuse_own_files(ch, ws: Path, default_workspace: str) -> None:
    """A workspace never overlaps ol's own files: writing one there would replace them."""
    own = own_files_under(ws)
    if not own:
        return
    shown = "ol's own folder" if own == ["."] else ", ".join(own[:3]) + (f" and {len(own) - 3} more" if len(own) > 3 else "")
    instead = Path.home() / ch.chapter / default_workspace
    raise UsageError(f"{ws} holds files of ol itself ({shown}; ol is {REPO}): a workspace there would replace them. "
                     f"Write it where ol keeps nothing, e.g. `ol start {ch.chapter} {instead}`")


def _repoint(ws: Path) -> str:
    """A workspace whose `.ol-command` names another ol (the checkout moved): the one line that points it here."""
    try:
        named = (ws / ".ol-command").read_text().splitlines()[0].strip()
    except (OSError, IndexError):
        return ""
    here = REPO / "ol"
    if named == str(here):
        return ""
    return (f" Its .ol-command names {named}, not this ol: `echo {here} > {ws.resolve() / '.ol-command'}` points its test "
            f"front end here (or run that with OL={here} set); your work stays as it is.")


def _keep_copy(path: Path) -> Path | None:
    """A dated copy of the file --force replaces, beside it (no language's build reads `*.bak`)."""
    if not path.is_file():
        return None
    copy = path.with_name(f"{path.name}.{time.strftime('%Y%m%d-%H%M%S')}.bak")
    n = 1
    while copy.exists():
        copy, n = path.with_name(f"{path.name}.{time.strftime('%Y%m%d-%H%M%S')}-{n}.bak"), n + 1
    shutil.copy2(path, copy)
    return copy

"""The given modules of a Rust workspace are always the course's (issue 36, item 6): a `lib.rs` with
`#[path = "…"] pub mod runner_target;` compiled the student's copy of a given module. Now any `#[path]` attribute
(or `path` in a `cfg_attr`), and a lib.rs that does not declare each given module plainly, is refused before the
build, naming the file, line and attribute (harness.languages.rust_source); what a comment, a string or a doc says
is not an attribute."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.kernel.errors import BadSubmission
from harness.languages.rust_source import cleaned, refusal
from harness.languages.rust_workspace import assemble, given_modules
from harness.registry import load_chapter

REPO = Path(__file__).resolve().parents[2]
CRATE = REPO / "reference" / "rust" / "crates" / "tl-engine"
RUST = load_chapter("L10.8").language("rust")
GIVEN = given_modules(RUST)
PLAIN = "pub mod runner_target;"

REFUSED = {  # what lib.rs says instead of `pub mod runner_target;` -> words the reason holds
    "#[path] to the student's file": ('#[path = "mine.rs"] pub mod runner_target;', "'#[path = \"mine.rs\"]' is refused"),
    "#[path] on its own line": ('#[path =\n  "mine.rs"]\npub mod runner_target;', "lib.rs:19: the attribute"),
    "path inside cfg_attr": ('#[cfg_attr(all(), path = "mine.rs")]\npub mod runner_target;', "cfg_attr(all(), path"),
    "an inner #![path]-like attribute": ('pub mod runner_target;\nmod x { #![cfg_attr(all(), path = "y")] }', "is refused"),
    "the given module inline": ("pub mod runner_target { pub struct RunnerTarget; }", "does not declare `pub mod runner_target;`"),
    "renamed from the student's module": ("pub mod mine;\npub use mine as runner_target;", "not renamed"),
    "cfg'd out, then inline": ("#[cfg(any())]\npub mod runner_target;\n#[cfg(all())]\npub mod runner_target {}", "no #[cfg]"),
    "declared inside another module only": ("pub mod inner { pub mod runner_target; }", "plainly at its top level"),
}
ACCEPTED = {  # what lib.rs may say: none of it is an attribute pointing a module elsewhere
    "as ol start writes it": PLAIN,
    "comments and strings": ('// #[path = "x.rs"]\n/* #[path = "y.rs"] /* nested */ #[path] */\n' + PLAIN +
                             '\nconst S: &str = "#[path = \\"z.rs\\"]";\nconst R: &str = r#"#[path = "q.rs"]"#;\n'
                             "fn f<'a>(x: &'a str) -> char { '\"' }"),
    "doc and lint attributes on it": '/// the course\'s runner target\n#[doc = "given"]\n#[allow(dead_code)]\n' + PLAIN,
    "a variable named path": PLAIN + '\npub fn p() -> usize { let path = [1usize, 2]; path.len() }\nuse std::path::Path;',
    "a macro's attribute, the declaration plain": PLAIN + '\nmacro_rules! m { ($a:ident) => { #[$a] fn g() {} } }',
}


def _crate(at: Path, instead: str) -> Path:
    shutil.copytree(CRATE / "src", at / "tl-engine" / "src")
    lib = at / "tl-engine" / "src" / "lib.rs"
    assert PLAIN in lib.read_text()
    lib.write_text(lib.read_text().replace(PLAIN, instead))
    (at / "tl-engine" / "src" / "mine.rs").write_text("pub struct RunnerTarget;\n")
    return at / "tl-engine" / "src"


@pytest.mark.parametrize("kind", list(REFUSED))
def test_a_lib_rs_that_could_compile_the_student_s_copy_of_a_given_module_is_refused_naming_it(tmp_path, kind):
    said, words = REFUSED[kind]
    why = refusal(_crate(tmp_path, said), GIVEN)
    assert why is not None and words in why, why


@pytest.mark.parametrize("kind", list(ACCEPTED))
def test_comments_strings_and_harmless_attributes_are_not_refused(tmp_path, kind):
    assert refusal(_crate(tmp_path, ACCEPTED[kind]), GIVEN) is None


def test_a_path_attribute_in_any_source_file_is_refused_with_its_file_and_line(tmp_path):
    src = _crate(tmp_path, PLAIN)
    (src / "spec.rs").write_text((CRATE / "src" / "spec.rs").read_text() + '\n#[path = "../mine.rs"]\nmod helper;\n')
    why = refusal(src, GIVEN)
    assert why is not None and why.startswith("tl-engine/src/spec.rs:") and "#[path" in why, why


def test_the_lexer_blanks_comments_strings_and_characters_but_keeps_lines_and_lifetimes():
    text = "a /* b /* c */ d */ e // f\n\"g\\\"h\" 'i' '\\'' r##\"j\"#k\"## <'l> x"
    clean = cleaned(text)
    assert len(clean) == len(text) and clean.count("\n") == 1
    assert [w for w in clean.split() if w] == ["a", "e", "<'l>", "x"], clean


def test_the_grading_build_refuses_before_it_builds(tmp_path):
    """The workspace of a build is not even assembled: a BadSubmission, which `ol check` and `ol grade` reject."""
    _crate(tmp_path / "sub" / "crates", REFUSED["#[path] to the student's file"][0])
    with pytest.raises(BadSubmission, match=r"#\[path"):
        assemble(RUST, tmp_path / "sub", tmp_path / "ws")
    assert not (tmp_path / "ws").exists()


@pytest.mark.slow(s=5)
def test_ol_check_refuses_the_crate_in_one_line_exit_2(tmp_path):
    _crate(tmp_path, REFUSED["#[path] to the student's file"][0])
    r = subprocess.run([sys.executable, "-m", "harness.cli", "check", "L10.8", "--submission", str(tmp_path / "tl-engine")],
                       cwd=tmp_path, capture_output=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    said = (r.stdout + r.stderr).decode(errors="replace")
    assert r.returncode == 2 and "#[path = \"mine.rs\"]" in said and "passed" not in said, said[-2000:]

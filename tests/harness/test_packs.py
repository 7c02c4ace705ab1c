"""A chapter is a folder: a toy pack made in a temporary directory, outside the project, with two
tests, one op, one golden file and one mutant, works with `ol tests`, `ol check` (reference, mutant,
a submission through the worker) and `ol mutants`, and a pack whose table and tests disagree is
refused before any test runs, naming both sides."""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def toy_patch(body: str) -> str:
    """A mutant of the toy reference (make_pack's text): double(x) returns `body` instead of 2 * x."""
    return f"""
        --- a/toypkg/core.py
        +++ b/toypkg/core.py
        @@ -6,2 +6,2 @@
         def double(x):
        -    return 2 * x
        +    return {body}
    """


TOY = {
    "__init__.py": '"""A toy chapter: doubling numbers."""\n',
    "chapter.toml": """
        chapter = "T0.1"
        title = "Doubling"
        tests = "tests/test_toy.py"
        golden = "fixtures/golden.json"
        mutants = "mutants/manifest.toml"
        ops = "ops"
        client = "client:Client"

        [language.python]
        reference = "reference"
        package = "toypkg"
        student_files = ["toypkg/core.py"]
        contract = "reference/toypkg/core.pyi"
        default_workspace = "py"
        [language.python.uploads]
        "core.py" = "toypkg/core.py"

        [[test]]
        name = "doubles_by_hand"
        kind = "unit"
        checks = "2 doubles to 4"
        why = "the worked example"

        [[test]]
        name = "doubles_match_the_golden_cases"
        kind = "differential"
        checks = "every golden case"
        why = "the port answers what the reference answers"
    """,
    "ops.py": """
        CONTRACT_ERROR = ("core", "ToyError")
        LOAD = ("core",)

        def op_double(s, a):
            return int(s.module("core").double(a["x"]))

        OPS = {"double": op_double}
    """,
    "client.py": """
        from harness.transport.impl import Impl

        class Client(Impl):
            def double(self, x):
                return self.call("double", {"x": x})
    """,
    "tests/test_toy.py": """
        from harness.pack import Domain, Param, Property, check

        class Reference:  # the judge's own answer
            def double(self, x):
                return 2 * x

        DOUBLE = Property(Domain("double", (Param("x", {"zero": lambda r, got: 0, "small": lambda r, got: r.randint(-9, 9),
                                                       "past u64": lambda r, got: 2**64 + r.randint(0, 9)}),)),
                          lambda impl, x: impl.double(x), lambda x: f"double({x})")

        def test_doubles_by_hand(impl):
            assert impl.double(2) == 4, "2 doubles to 4"

        def test_doubles_match_the_golden_cases(impl, golden):
            wrong = [c for c in golden["cases"] if impl.double(c["x"]) != c["expect"]]
            assert not wrong, f"{len(wrong)} golden cases differ, first {wrong[0]}"
            problem = check(DOUBLE, impl, Reference(), seed=len(golden["cases"]))
            assert problem is None, problem
    """,
    "fixtures/golden.json": json.dumps({"cases": [{"x": 3, "expect": 6}, {"x": -5, "expect": -10}, {"x": 0, "expect": 0}]}),
    "mutants/manifest.toml": """
        [[mutant]]
        id = "m01"
        pitfall = "Adding one instead of doubling"
        symptom = "every answer is off"
        must_fail = "doubles_match_the_golden_cases"
    """,
    "mutants/m01.patch": toy_patch("x + 2"),
    "reference/toypkg/__init__.py": "",
    "reference/toypkg/core.pyi": '''
        class ToyError(ValueError): ...

        def double(x: int) -> int:
            """Twice x."""
    ''',
    "reference/toypkg/core.py": """
        class ToyError(ValueError):
            pass


        def double(x):
            return 2 * x
    """,
}


def make_pack(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "toy" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def ol(packs: Path, cwd: Path, *args, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OL_CHAPTERS_PATH": str(packs), **(extra_env or {})}
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def packs(tmp_path) -> Path:
    return make_pack(tmp_path / "packs", TOY)


@pytest.mark.slow
def test_a_toy_pack_outside_the_project_is_a_chapter(packs, tmp_path):
    r = ol(packs, tmp_path, "tests", "T0.1")
    assert r.returncode == 0 and "doubles_by_hand" in r.stdout and "2 tests" in r.stdout, r.stdout + r.stderr
    r = ol(packs, tmp_path, "check", "T0.1", "--submission", "reference", "--json", "ref.json")
    assert r.returncode == 0 and "2 of 2 passed" in r.stdout, r.stdout + r.stderr
    assert json.loads((tmp_path / "ref.json").read_text())["summary"]["passed"] == 2
    r = ol(packs, tmp_path, "check", "T0.1", "--submission", "mutant:m01")
    assert r.returncode == 1 and "1 of 2 passed" in r.stdout, r.stdout + r.stderr
    r = ol(packs, tmp_path, "mutants", "T0.1")
    assert r.returncode == 0 and "1 of 1 mutants caught" in r.stdout, r.stdout + r.stderr


@pytest.mark.slow
def test_a_toy_submission_goes_through_the_worker(packs, tmp_path):
    student = tmp_path / "student"
    (student / "toypkg").mkdir(parents=True)
    (student / "toypkg" / "__init__.py").write_text("")
    (student / "toypkg" / "core.py").write_text("class ToyError(ValueError):\n    pass\n\ndef double(x):\n    return x * x\n")
    r = ol(packs, tmp_path, "check", "T0.1", "--submission", "student")  # relative, as a student types it
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 of 2 passed" in r.stdout and "golden cases differ" in r.stdout, r.stdout  # 2*2 == 2+2, 3*3 != 6
    (tmp_path / "core.py").write_text("def double(x):\n    return 2 * x\n")
    r = ol(packs, tmp_path, "check", "T0.1", "--submission", "core.py")  # a bare upload: the rest from the reference
    assert r.returncode == 0 and "2 of 2 passed" in r.stdout, r.stdout + r.stderr


def test_a_test_without_a_row_is_refused_naming_both(tmp_path):
    files = dict(TOY)
    files["tests/test_toy.py"] = TOY["tests/test_toy.py"] + "\n        def test_triples(impl):\n            assert True\n"
    packs = make_pack(tmp_path / "packs", files)
    r = ol(packs, tmp_path, "check", "T0.1", "--submission", "reference")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "test_triples" in r.stderr and "chapter.toml" in r.stderr and "[[test]]" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    assert "passed" not in r.stdout, "no test may run"


def test_a_row_without_a_test_is_refused_naming_both(tmp_path):
    files = dict(TOY)
    files["chapter.toml"] = TOY["chapter.toml"] + '\n        [[test]]\n        name = "triples"\n        kind = "unit"\n        checks = "x"\n        why = "y"\n'
    packs = make_pack(tmp_path / "packs", files)
    r = ol(packs, tmp_path, "tests", "T0.1")
    assert r.returncode == 3 and "'triples'" in r.stderr and "test_toy.py" in r.stderr, r.stderr


def test_an_unexpected_exception_is_exit_3_in_one_line_and_traced_only_with_debug(tmp_path):
    files = dict(TOY)
    files["ops.py"] = "def op_double(s, a:\n"  # a pack whose ops do not even parse: a bug on the staff side
    packs = make_pack(tmp_path / "packs", files)
    r = ol(packs, tmp_path, "check", "T0.1", "--submission", "reference")
    assert r.returncode == 3 and "internal error: SyntaxError" in r.stderr, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) <= 2 and "passed" not in r.stdout, r.stderr
    files["client.py"] = "raise RuntimeError('boom')\n"  # fails outside any test: an internal error of ol's own
    packs = make_pack(tmp_path / "packs2", files)
    r = ol(packs, tmp_path, "diff", "T0.1", "--submission", "reference")
    assert r.returncode == 3 and "internal error: RuntimeError: boom" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = ol(packs, tmp_path, "--debug", "diff", "T0.1", "--submission", "reference")
    assert r.returncode == 3 and "Traceback" in r.stderr, r.stderr


def test_a_language_is_a_worker_command_and_a_build_step(packs, tmp_path, monkeypatch):
    """A second language plugs in as one entry of harness.languages and a [language.*] table in the pack:
    here "pyc", whose build step byte-compiles the submission into a scratch folder and whose worker is
    Python's, run on what the build made. The layout function finds it; the build runs; the worker serves."""
    import compileall
    import shutil

    from harness import languages
    from harness.subjects.layout import detect
    from harness.registry import load_chapter
    from harness.subjects.open import open_impl

    built = []

    def build(chapter, package_dir, scratch, mode):
        shutil.copytree(package_dir / "toypkg", scratch / "toypkg")
        assert compileall.compile_dir(scratch / "toypkg", quiet=1, legacy=True)
        for source in (scratch / "toypkg").glob("*.py"):
            source.unlink()  # only the byte code is left: the worker must run what the build made
        built.append(scratch)
        return scratch

    def worker(chapter, package_dir, home):
        return languages.LANGUAGES["python"].worker(chapter, package_dir, home)  # the protocol program, on the build's output

    monkeypatch.setitem(languages.LANGUAGES, "pyc", languages.Language("pyc", worker, build))
    toml = packs / "toy" / "chapter.toml"
    toml.write_text(toml.read_text().replace("[[test]]", '''[language.pyc]
reference = "reference"
package = "toypkg"
student_files = ["toypkg/core.py"]
contract = "reference/toypkg/core.pyi"
default_workspace = "pyc"

[[test]]''', 1))
    monkeypatch.setenv("OL_CHAPTERS_PATH", str(packs))
    ch = load_chapter("T0.1")
    student = tmp_path / "student"
    (student / "toypkg").mkdir(parents=True)
    (student / "toypkg" / "__init__.py").write_text("")
    (student / "toypkg" / "core.py").write_text("def double(x):\n    return x + x\n")
    assert detect(ch, student, "pyc").language == "pyc"
    impl = open_impl(ch, str(student), language_name="pyc")
    try:
        assert impl.double(21) == 42
        assert built and not list((built[0] / "toypkg").glob("*.py")), "the worker ran the build's output"
    finally:
        impl.close()
    assert not built[0].exists(), "the build's scratch folder goes with the Impl"


CALC = REPO / "tests" / "harness" / "toy_language" / "calc.py"  # the toy language's folder: its Language, its worker
CALC_TABLE = '''[language.calc]
reference = "reference_calc"
package = "toycalc"
student_files = ["toycalc/core.calc"]
contract = "reference_calc/toycalc/core.calc"
default_workspace = "calc"
[language.calc.uploads]
"core.calc" = "toycalc/core.calc"
[language.calc.course_sources]   # the calc worker's op table, the pack's: op -> the argument that is x
"calc/ops.json" = "ops.json"

[[test]]'''


def calc_pack(root: Path) -> Path:
    """The toy pack, also graded in calc: its [language.calc] table, its calc reference and op table, and m01 ported."""
    files = {**TOY, "calc/ops.json": json.dumps({"double": "x"}), "reference_calc/toycalc/core.calc": "2 * x\n",
             "mutants/m01.calc.patch": """
                 --- a/toycalc/core.calc
                 +++ b/toycalc/core.calc
                 @@ -1 +1 @@
                 -2 * x
                 +x + 2
             """}
    files["chapter.toml"] = textwrap.dedent(TOY["chapter.toml"]).replace("[[test]]", CALC_TABLE, 1)
    files["mutants/manifest.toml"] = TOY["mutants/manifest.toml"] + '        calc_patch = "m01.calc.patch"\n'
    return make_pack(root, files)


def calc_submission(folder: Path, expression: str) -> Path:
    (folder / "toycalc").mkdir(parents=True)
    (folder / "toycalc" / "core.calc").write_text(expression + "\n")
    return folder


@pytest.mark.slow
def test_a_second_language_plugs_in_with_one_entry_and_is_graded_by_ol(tmp_path):
    """A toy language kept outside the engine (tests/harness/toy_language: a build step that compiles an expression,
    a worker that speaks spec/protocol.md) is registered by one entry, OL_LANGUAGES=calc=FILE, and `ol check` and
    `ol mutants` grade it through the real path: layout, build, confined worker, the pack's tests, the verdict."""
    assert not [p for p in (REPO / "harness").rglob("*.py") if re.search(r"\bcalc\b", p.read_text())], "the engine knows nothing of calc"
    packs = calc_pack(tmp_path / "packs")
    entry = {"OL_LANGUAGES": f"calc={CALC}"}

    def calc_ol(*args, env=entry):
        return ol(packs, tmp_path, *args, extra_env=env)

    r = calc_ol("check", "T0.1", "--lang", "calc", "--submission", "reference", env={"OL_LANGUAGES": ""})
    assert r.returncode == 2 and "ol does not grade 'calc'" in r.stderr, r.stdout + r.stderr  # no entry: not a language
    r = calc_ol("check", "T0.1", "--lang", "calc", "--submission", "reference", "--json", "ref.json")
    assert r.returncode == 0 and "2 of 2 passed" in r.stdout, r.stdout + r.stderr
    assert json.loads((tmp_path / "ref.json").read_text())["summary"]["passed"] == 2
    calc_submission(tmp_path / "square", "x * x")  # 2*2 == 4, but 3*3 != 6
    r = calc_ol("check", "T0.1", "--submission", "square")  # its layout says calc: no --lang needed
    assert r.returncode == 1 and "1 of 2 passed" in r.stdout and "golden cases differ" in r.stdout, r.stdout + r.stderr
    calc_submission(tmp_path / "typo", "2 * y")
    r = calc_ol("check", "T0.1", "--submission", "typo")
    assert r.returncode == 1 and "0 of 2 passed" in r.stdout, r.stdout + r.stderr
    assert "core.calc did not compile: column 5: unexpected 'y'" in r.stdout, r.stdout  # the build's error, on every test
    (tmp_path / "core.calc").write_text("x + x\n")
    r = calc_ol("check", "T0.1", "--submission", "core.calc")  # a bare upload, placed by the pack's table
    assert r.returncode == 0 and "2 of 2 passed" in r.stdout, r.stdout + r.stderr
    r = calc_ol("mutants", "T0.1", "--lang", "calc")
    assert r.returncode == 0 and "1 of 1 mutants caught" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("line, says", [
    ('"calc/nothing.json" = "ops.json"', "'calc/nothing.json', which is not a file of the pack"),
    ('"calc/ops.json" = "../ops.json"', "a place must be a relative path inside the workspace"),
    ('"calc/ops.json" = "toycalc/ops.json"', "outside the submission's toycalc"),  # the student's own package
])
def test_the_registry_refuses_a_course_source_that_is_missing_or_misplaced(tmp_path, monkeypatch, line, says):
    from harness.kernel.errors import RegistryError
    from harness.registry import load_chapter

    packs = calc_pack(tmp_path / "packs")
    toml = packs / "toy" / "chapter.toml"
    toml.write_text(toml.read_text().replace('"calc/ops.json" = "ops.json"', line))
    monkeypatch.setenv("OL_CHAPTERS_PATH", str(packs))
    with pytest.raises(RegistryError, match="malformed chapter table") as e:
        load_chapter("T0.1")
    assert says in str(e.value)


def test_every_assert_of_a_registered_chapters_tests_says_its_sentence():
    """A check runs pytest with --assert=plain (harness.check.runner: no import hook racing the loader's thread), so
    an assert's own message is all a student reads of its failure: every assert of every pack's tests has one."""
    import ast

    from harness.registry import known_chapters, load_chapter

    bare = [f"{f}:{n.lineno}" for name in known_chapters() for f in load_chapter(name).tests_files
            for n in ast.walk(ast.parse(Path(f).read_text())) if isinstance(n, ast.Assert) and n.msg is None]
    assert not bare, "asserts without a message (a student would read a bare AssertionError): " + ", ".join(bare)


def test_a_check_installs_no_assertion_rewriting_hook(tmp_path):
    """pytest's rewriting hook iterates a set its start-up grows while the loader's thread imports through it: an `ol
    mutants --set extra` once ended in "internal error: RuntimeError: Set changed size during iteration". A check in
    a fresh interpreter (as `ol check` runs) makes no such hook."""
    script = textwrap.dedent("""
        import sys
        from _pytest.assertion import rewrite
        made = []
        real = rewrite.AssertionRewritingHook.__init__
        rewrite.AssertionRewritingHook.__init__ = lambda self, *a, **k: (made.append(1), real(self, *a, **k))[1]
        from harness.check.runner import CheckOptions, run_check
        from harness.registry import load_chapter
        report = run_check(load_chapter("L10.8"), "mutant:s01", CheckOptions(only=["hand_example_prompt_lookup"]))
        print(len(report.tests), len(made))
    """)
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.split() == ["1", "0"], r.stdout + r.stderr[-3000:]

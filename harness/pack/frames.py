"""Inputs derived from a domain table (the category-partition method): each parameter of a function lists its
categories, kinds of value the contract treats differently, each a small function drawing one value of its kind;
a frame picks one category per parameter; the frames of a run cover every pair of categories of every two
parameters (so every category at least once), then add random frames on top. Everything is drawn with
`random.Random` from a seed: the same seed and table give the same inputs on every machine and with every
library version, and nothing outside the table (no module the process imported) changes them.

    ctx = Param("ctx", {"empty": lambda r, got: [], "periodic": lambda r, got: [1, 2] * r.randint(2, 9)})
    k = Param("k", {"zero": lambda r, got: 0, "past the context": lambda r, got: len(got["ctx"]) + 1})
    domain = Domain("lookup", (ctx, k))
    for frame, args in drawn(domain, seed=7):   # frame: {"ctx": "periodic", "k": "zero"}; args: ([1, 2, 1, 2], 0)
        ...

A category's draw sees the values drawn for the parameters before it (`got`), which is how a table states a
constraint between parameters (min_ngram at most max_ngram, an id below the row's length). A category is named
`param:category` outside its parameter (`Domain.names`, an explicit input's `category`).
"""

from dataclasses import dataclass, field
import random
from typing import Any, Callable, Iterator

Draw = Callable[[random.Random, dict], Any]  # (the generator, the values drawn so far by name) -> one value


@dataclass(frozen=True)
class Param:
    """One parameter: its categories in order, the simplest first (shrinking tries the first ones)."""
    name: str
    categories: dict[str, Draw]


@dataclass(frozen=True)
class Domain:
    """A function's domain: its parameters in the order the call takes them (`assemble` builds the call's argument
    tuple from the values by name when that order or shape differs), and how many random frames a run adds on top
    of the covering ones."""
    name: str
    params: tuple[Param, ...]
    assemble: Callable[[dict], tuple] | None = None
    random_frames: int = 30
    names: frozenset = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", frozenset(f"{p.name}:{c}" for p in self.params for c in p.categories))

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


def random_frame(domain: Domain, rng: random.Random) -> dict[str, str]:
    return {p.name: rng.choice(list(p.categories)) for p in domain.params}


def drawn(domain: Domain, seed: int) -> Iterator[tuple[dict[str, str], tuple]]:
    """(frame, args) for a run from `seed`: the covering frames, then `domain.random_frames` random ones. The
    generator is seeded from the seed and the domain's name (a string seed: hashed the same way everywhere)."""
    rng = random.Random(f"{seed}:{domain.name}")
    frames = covering(domain, rng) + [random_frame(domain, rng) for _ in range(domain.random_frames)]
    for frame in frames:
        yield frame, domain.args(frame, rng)

"""Targets the generation tests watch: the fake target with a log of its calls, or with a record of
what the listener had heard at each forward pass; and the reference run that places an EOS inside
a run of accepted drafts. Judge side: they hold no answers of the implementation under test."""

from .fake_target import FakeTarget


def misuse(target: FakeTarget) -> str:
    return f"; the target was misused: {target.misuse[0]}" if target.misuse else ""


class LoggedTarget(FakeTarget):
    """Logs every call, so the judge can count what was drafted and accepted on its own."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.log: list[tuple[str, int, int]] = []  # (call, cached before, ids fed or length kept)
        self.fed: list[list[int]] = []  # the ids of each forward pass, in order

    def extend(self, ids):
        self.log.append(("extend", self.cached(), len(ids)))
        self.fed.append([int(i) for i in ids])
        return super().extend(ids)

    def truncate(self, length):
        self.log.append(("truncate", self.cached(), int(length)))
        return super().truncate(length)

    def forward_passes(self) -> list[tuple[int, list[int], int]]:
        """(cached before, ids fed, positions kept after) of each forward pass: kept is the length of the
        truncate that follows it, else everything fed."""
        out, fed = [], iter(self.fed)
        for (call, before, n), nxt in zip(self.log, self.log[1:] + [("end", 0, 0)]):
            if call == "extend":
                out.append((before, next(fed), nxt[2] if nxt[0] == "truncate" else before + n))
        return out

    def observed_stats(self, prompt_len: int) -> dict:
        """drafted = ids fed beyond the pending token(s); accepted = drafted positions kept by the truncate after."""
        drafted = accepted = 0
        for before, ids, kept in self.forward_passes():
            pending = prompt_len if before == 0 else 1
            drafted += len(ids) - pending
            accepted += kept - before - pending
        return {"drafted": drafted, "accepted": accepted, "target_calls": len(self.fed)}


def eos_inside_accepted_run(ref, prompt, vocab: int, max_new: int) -> tuple[int, int]:
    """(index, token) of an emitted token that is not the last of its round and new in the output (it may
    be in the prompt, which prompt lookup copies from), found by running the reference (judge side)."""
    spec, SamplingParams = ref.module("infer.spec"), ref.module("infer.sampling").SamplingParams
    target, rounds = FakeTarget(ref, vocab), []

    def heard(t, lp) -> bool:  # each token, with the forward passes made by then; go on
        rounds.append((t, target.calls))
        return True

    spec.generate_stream(target, spec.SpecConfig.parse("prompt_lookup", 4), prompt, SamplingParams(), 7, max_new, [], heard)
    for j in range(len(rounds) - 1):
        t, r = rounds[j]
        if rounds[j + 1][1] == r and t not in [x for x, _ in rounds[:j]]:
            return j, t
    raise AssertionError("the fake target gave no accepted run to place EOS in (harness bug)")



class WatchedTarget(FakeTarget):
    """Records, at every forward pass, how many tokens the listener had heard, the cached positions, the ids fed."""

    def __init__(self, heard: list, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.heard = heard
        self.passes: list[tuple] = []

    def extend(self, ids):
        self.passes.append((len(self.heard), self.cached(), [int(i) for i in ids]))
        return super().extend(ids)

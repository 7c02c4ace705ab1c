"""What the chapter's tests share: the requests they send (their tolerance is the case schema's, chapters.L10_8.cases)."""

from .fake_target import FakeTarget

GREEDY = dict(temperature=0.0)
PROMPTS = ([1, 2, 3, 4, 5], [3, 3, 3, 3], [9, 1, 9, 1, 9, 2])  # three prompts of the fake target
VOCAB = 16  # the fake target's vocabulary in the generation tests
MAX_NEW = 40  # long enough for several rounds to reject, and to reach the request's budget
K = 4  # the runtime's default k
SEED = 7  # the generation tests' seed (greedy draws nothing, but a request carries one)
PENALISED = dict(temperature=0.0, repetition_penalty=1.5, frequency_penalty=0.4, presence_penalty=0.4)  # greedy, every penalty on
SAMPLED = dict(temperature=0.6)  # sampled requests that draft: rejections in most rounds, full acceptances in some
SAMPLED_PENALISED = dict(temperature=0.7, top_p=0.9, repetition_penalty=1.3, frequency_penalty=0.3, presence_penalty=0.2)
PERIODIC = [1, 2, 1, 2, 1, 2]  # both drafts surely draft after it
HAND_ROWS = [[0, 1, 3, 0.5], [0, 1, 0.5, 2], [5, 0, 0, 0]]  # section 3's greedy round
HAND_SEED = 12345  # any seed: greedy verification must not move the generator


def cfg(draft: str, k: int = K) -> dict:
    return {"draft": draft, "k": k}


def budget_target(ref, prompt, max_new: int) -> FakeTarget:
    """A fake target that refuses KV past what the request can ever need: len(prompt) + max_new - 1."""
    return FakeTarget(ref, VOCAB, budget=len(prompt) + max_new - 1)

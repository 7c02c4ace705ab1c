"""The bad calls `verify_rejects_bad_shapes` makes: each a description and a call that must raise SpecError."""

NAN, INF = float("nan"), float("inf")


class MiscountingTarget:
    """A broken target (judge side): extend returns `extra` rows more than the ids it was fed (fewer when negative)."""

    def __init__(self, extra: int) -> None:
        self.extra, self.held = extra, 0

    def cached(self) -> int:
        return self.held

    def extend(self, ids):
        self.held += len(ids)
        return [[0.0, 1.0, 0.0, 0.0]] * (len(ids) + self.extra)

    def truncate(self, length) -> None:
        self.held = int(length)


def bad_inputs(impl, rows, greedy: dict, sampled: dict) -> list:
    """(what, call) pairs over the hand example's rows (vocabulary 4, a draft of 2 needs 3 rows)."""
    q = [0.25, 0.25, 0.25, 0.25]
    return [
        ("2 rows for a draft of 2 (need 3)", lambda: impl.verify_draft(rows[:2], [2, 1], None, greedy, [], [], 1)),
        ("4 rows for a draft of 2 (need 3)", lambda: impl.verify_draft(rows + [rows[0]], [2, 1], None, greedy, [], [], 1)),
        ("rows of different vocabulary sizes", lambda: impl.verify_draft([rows[0], rows[1][:3], rows[2]], [2, 1], None, greedy, [], [], 1)),
        ("draft id 4 in a vocabulary of 4", lambda: impl.verify_draft(rows, [2, 4], None, greedy, [], [], 1)),
        ("draft id -1", lambda: impl.verify_draft(rows, [-1, 2], None, sampled, [], [], 1)),
        ("one draft distribution for a draft of 2", lambda: impl.verify_draft(rows, [2, 1], [q], sampled, [], [], 1)),
        ("three draft distributions for a draft of 2", lambda: impl.verify_draft(rows, [2, 1], [q, q, q], sampled, [], [], 1)),
        ("a draft distribution of length 3 in a vocabulary of 4", lambda: impl.verify_draft(rows, [2, 1], [q, q[:3]], sampled, [], [], 1)),
        ("a draft distribution with q[d] = 0", lambda: impl.verify_draft(rows, [2, 1], [q, [0.5, 0.0, 0.5, 0.0]], sampled, [], [], 1)),
        ("q[d] = 0 at position 1 while position 0 is surely rejected (check before walking)",
         lambda: impl.verify_draft([[30.0, -30.0, 0.0, 0.0]] + rows[1:], [1, 1], [q, [0.5, 0.0, 0.5, 0.0]], sampled, [], [], 1)),
        ("a row that is a matrix", lambda: impl.verify_draft([[rows[0], rows[0]], rows[1], rows[2]], [2, 1], None, greedy, [], [], 1)),
        ("a later row that is a 2x2 matrix (4 numbers, like the vocabulary)",
         lambda: impl.verify_draft([rows[0], [[0.0, 1.0], [0.5, 2.0]], rows[2]], [2, 1], None, greedy, [], [], 1)),
        ("a draft distribution of length 3 at position 1 while position 0 is surely rejected",
         lambda: impl.verify_draft([[30.0, -30.0, 0.0, 0.0]] + rows[1:], [1, 1], [q, q[:3]], sampled, [], [], 1)),
        ("a prompt holding token 4 in a vocabulary of 4", lambda: impl.verify_draft(rows, [2, 1], None, greedy, [4], [], 1)),
        ("dense_distribution with a prompt holding token 2 in a vocabulary of 2", lambda: impl.dense_distribution([0.0, 1.0], greedy, [2], [])),
        ("dense_distribution of a 2x2 matrix", lambda: impl.dense_distribution([[0.0, 1.0], [1.0, 0.0]], greedy, [], [])),
        ("dense_distribution of logits holding NaN", lambda: impl.dense_distribution([float("nan"), 0.0], greedy, [], [])),
        ("residual of 2-D p and q", lambda: impl.residual([[0.5, 0.5]], [[0.5, 0.5]])),
        ("speculative_step with a negative probability in p", lambda: impl.speculative_step([-0.1, 0.6, 0.5], [0.2, 0.4, 0.4], 1, 0.3, 0.8)),
        ("speculative_step with q of length 2 for p of 3", lambda: impl.speculative_step([0.2, 0.5, 0.3], [0.5, 0.5], 0, 0.3, 0.8)),
        ("speculative_step proposing x = 3 in a vocabulary of 3", lambda: impl.speculative_step([0.2, 0.5, 0.3], [0.2, 0.5, 0.3], 3, 0.3, 0.8)),
        ("speculative_step with u_accept = 1.0 (uniforms are in [0, 1))", lambda: impl.speculative_step([0.2, 0.5, 0.3], [0.6, 0.2, 0.2], 0, 1.0, 0.8)),
        ("residual of p and q of different lengths", lambda: impl.residual([0.2, 0.5, 0.3], [0.5, 0.5])),
        ("sample_dense with u = -0.1", lambda: impl.sample_dense([0.5, 0.5], -0.1)),
        ("sample_dense over a distribution with no mass", lambda: impl.sample_dense([0.0, 0.0, 0.0], 0.5)),
        # draft distributions are checked at every temperature: greedy never reads them, but a malformed one is refused
        ("one draft distribution for a draft of 2, at temperature 0", lambda: impl.verify_draft(rows, [2, 1], [q], greedy, [], [], 1)),
        ("a draft distribution with q[d] = 0, at temperature 0",
         lambda: impl.verify_draft(rows, [2, 1], [q, [0.5, 0.0, 0.5, 0.0]], greedy, [], [], 1)),
        ("a draft distribution of length 3, at temperature 0", lambda: impl.verify_draft(rows, [2, 1], [q, q[:3]], greedy, [], [], 1)),
        ("a draft distribution holding NaN", lambda: impl.verify_draft(rows, [2, 1], [q, [NAN, 0.5, 0.25, 0.25]], sampled, [], [], 1)),
        ("an output holding token 4 in a vocabulary of 4", lambda: impl.verify_draft(rows, [2, 1], None, greedy, [], [4], 1)),
        ("row 0 holding NaN (every walk reaches row 0), at temperature 0",
         lambda: impl.verify_draft([[NAN, 1.0, 3.0, 0.5]] + rows[1:], [2, 1], None, greedy, [], [], 1)),
        ("row 0 holding +inf (every walk reaches row 0)", lambda: impl.verify_draft([[0.0, INF, 3.0, 0.5]] + rows[1:], [2, 1], None, sampled, [], [], 1)),
        ("dense_distribution of logits that are -inf everywhere", lambda: impl.dense_distribution([-INF, -INF], sampled, [], [])),
        ("speculative_step with u_resample = 1.0, though u_accept 0.1 < 1/3 accepts (both uniforms are checked on every call)",
         lambda: impl.speculative_step([0.2, 0.5, 0.3], [0.6, 0.2, 0.2], 0, 0.1, 1.0)),
        ("speculative_step with u_accept = -0.1", lambda: impl.speculative_step([0.2, 0.5, 0.3], [0.6, 0.2, 0.2], 0, -0.1, 0.8)),
        ("speculative_step with a p of all zeros (it rejects every x and leaves nothing to resample)",
         lambda: impl.speculative_step([0.0, 0.0, 0.0], [0.6, 0.2, 0.2], 0, 0.3, 0.8)),
        ("sample_dense with u = 1.0 (uniforms are in [0, 1))", lambda: impl.sample_dense([0.5, 0.5], 1.0)),
        ("sample_dense over an empty p", lambda: impl.sample_dense([], 0.5)),
        ("residual of empty p and q", lambda: impl.residual([], [])),
        ("residual with q holding +inf", lambda: impl.residual([0.5, 0.5], [INF, 0.0])),
        ("residual with p holding NaN", lambda: impl.residual([NAN, 0.5], [0.5, 0.5])),
        ("residual with a negative probability in q", lambda: impl.residual([0.5, 0.5], [0.75, -0.25])),
        ("sample_dense over a p holding NaN", lambda: impl.sample_dense([0.5, NAN], 0.25)),
        ("sample_dense with a negative probability", lambda: impl.sample_dense([-0.5, 1.5], 0.25)),
        # the step loop's own rows: a target must return one row per id it was fed
        ("a target whose extend returns 2 rows for the 3 prompt ids",
         lambda: impl.generate(MiscountingTarget(-1), {"draft": "none", "k": 1}, [1, 2, 3], greedy, 7, 1, [])),
        ("a target whose extend returns 4 rows for the 3 prompt ids",
         lambda: impl.generate(MiscountingTarget(+1), {"draft": "none", "k": 1}, [1, 2, 3], greedy, 7, 1, [])),
    ]

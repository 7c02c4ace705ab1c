"""Where untrusted code runs: the one sandbox function and what chooses and limits it.

    bwrap    the sandbox itself (bubblewrap, rlimits, a limiter): the security argument, one module
    confine  the mode a machine can give (bwrap, an unprivileged uid, unconfined) and the confined copy, build and kill
    uids     the pool of unprivileged uids, leased across processes
"""

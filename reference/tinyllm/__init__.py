"""tinyllm: the course's reference implementation (loaded by path by the `ol` harness, never installed).

Modules use relative imports only, so the package can be loaded under any name (the harness loads
mutated copies beside the reference in one process).
"""

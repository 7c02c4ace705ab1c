"""Tools for the course's staff (issue 27 moves mutants, mutmut, rules, gradescope here; similarity is here)."""

"""Tools that prove and ship the tests: mutant kill matrices, mutmut, the rule table, the Gradescope bundle."""

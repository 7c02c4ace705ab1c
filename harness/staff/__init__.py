"""Tools that prove and ship the tests, and look across a class: mutant kill matrices, mutmut, the rule table, the
Gradescope bundle, similarity between submissions."""

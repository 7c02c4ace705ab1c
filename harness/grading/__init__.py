"""A class: ol grade's pieces (issue 27 moves grade, ledger, judge, ... here; the roster and the class report are here)."""

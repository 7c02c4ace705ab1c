"""The kernel: the vocabulary every layer of harness/ speaks (errors and exit codes, outcomes, the Report, where
things are, what a long step is doing now, the install roles, ol's cache folder and its records)."""

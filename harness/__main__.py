"""`python -m harness` is how ./ol runs ol: a check through the judge server when one is up (harness.served), else
in this process; its help and errors say `ol`."""

from harness.served import main

main()

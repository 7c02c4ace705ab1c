"""`-m harness.cli` is how ./ol runs ol; its help and errors say `ol`."""

from . import main

main(prog_name="ol")

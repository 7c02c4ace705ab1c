"""`-m harness.cli`: ol (./ol runs `-m harness`, the same command, isolated); its help and errors say `ol`."""

from . import main

main(prog_name="ol")

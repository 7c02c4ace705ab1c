"""`-m harness.cli`: ol, always in this process (./ol runs `-m harness`, which may hand a check to the judge
server: harness.served); its help and errors say `ol`."""

from . import main

main(prog_name="ol")

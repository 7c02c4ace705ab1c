"""The chapter packs ol ships: one folder per chapter (`L10_8/`: its chapter.toml, ops, judge helpers,
tests, oracle, fixtures and mutants). harness.registry finds them here and in OL_CHAPTERS_PATH."""

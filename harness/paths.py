"""Where the generic engine's own things live. A chapter's paths come from its pack (harness.registry)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REFERENCE_DIR = REPO / "reference"  # the course's reference: holds the package directory `tinyllm/`
CHAPTERS_DIR = REPO / "chapters"  # the chapter packs shipped with ol; OL_CHAPTERS_PATH adds more

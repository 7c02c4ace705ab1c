"""What every bench shares: its --out and --quick options, and writing its figures as JSON.

Not a bench itself (CI runs every bench/[!_]*.py with --quick). Each bench's figures go to
bench/out/<name>.json, or <name>.quick.json for a smoke run, so CI never overwrites a full run's.
"""

import argparse
import json
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parent / "out"  # git ignores it


def add_common(ap: argparse.ArgumentParser, name: str, quick_help: str) -> None:
    ap.add_argument("--out", type=Path, default=None,
                    help=f"the JSON of figures (default bench/out/{name}.json; {name}.quick.json with --quick)")
    ap.add_argument("--quick", action="store_true", help=f"smoke run: {quick_help}")


def out_path(a: argparse.Namespace, name: str) -> Path:
    return a.out or OUT_DIR / f"{name}{'.quick' if a.quick else ''}.json"


def write_figures(path: Path, data: dict, indent: int = 2) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=indent) + "\n")

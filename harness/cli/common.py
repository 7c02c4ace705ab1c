"""What every command of the CLI shares: its two consoles, its verdict (Exit), writing a JSON file, reading a seed."""

import json
import secrets
import sys
from pathlib import Path

from rich.console import Console

from ..kernel.errors import UsageError, raise_if_interrupted


# wide tables in logs and CI; sentences are not reflowed (a path or a command in one stays whole, to copy)
out = Console(highlight=False, width=None if sys.stdout.isatty() else 160, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)  # messages are not reflowed


class Exit(Exception):
    """A command's verdict: raised by commands, turned into the process's exit code in one place."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def write_json(path: str, data) -> None:
    raise_if_interrupted()  # no report after a Ctrl-C, even one something swallowed (kernel.errors)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=2) + "\n")


def seed(text: str, option: str = "--fresh") -> int:
    """A seed from --fresh/--seed's text: an integer, "random", or @FILE (the seed read from a private file)."""
    if text == "random":
        return secrets.randbits(63)
    if text.startswith("@"):  # @FILE: the seed read from a private file, so that no command line shows it
        try:
            text = Path(text[1:]).read_text().strip()
        except OSError as e:
            raise UsageError(f"{option} {text}: cannot read the seed from {text[1:]} ({e.strerror or e}); "
                             "name a readable file holding the seed") from None
    try:
        seed = int(text, 0)
    except ValueError:
        raise UsageError(f"{option} takes an integer seed, got {text!r}") from None
    if not 0 <= seed < 2**64:
        raise UsageError(f"{option} must be a 64-bit unsigned integer, got {seed}")
    return seed

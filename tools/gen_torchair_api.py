"""Writes docs/torchair-api.md from torchair's tables of TorchAir names and their outcomes
(python/torchair/configs/outcomes.py, python/torchair/facade.py). ``--check`` exits 1 if the
file is not what the tables give (tests/python/test_torchair_api.py runs that)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "torchair-api.md"


def main(argv: list[str]) -> int:
    from torchair.facade import markdown

    text = markdown()
    if "--check" in argv:
        if not DOC.is_file() or DOC.read_text() != text:
            print(f"{DOC} is out of date: run python tools/gen_torchair_api.py")
            return 1
        return 0
    DOC.write_text(text)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Turns the OpInfo test's record into docs/opinfo-coverage.md.

    TORCHAIR_OPINFO_REPORT=/tmp/opinfo.json python -m pytest tests/python/test_ops_opinfo.py
    python tools/opinfo_report.py /tmp/opinfo.json > docs/opinfo-coverage.md
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    data = json.load(open(sys.argv[1]))
    compiled = sum(v["compiled"] for v in data.values())
    unsupported = sum(len(v["unsupported"]) for v in data.values())
    print("# OpInfo coverage\n")
    print(
        f"PyTorch's own OpInfo samples (up to 6 per op and dtype) for the {len(data)} ops torchair claims, "
        "run through `torch.compile(backend=torchair)` and compared with eager "
        "(`tests/python/test_ops_opinfo.py`). Every sample that compiled matched eager; a sample that "
        "is not supported runs in eager (its answer is still checked) and is listed here with the reason.\n"
    )
    print(f"- samples compiled and matching eager: **{compiled}**")
    print(f"- samples not supported (eager fallback): **{unsupported}**\n")
    print("| op | compiled | not supported (reason) |")
    print("|---|---|---|")
    for name, v in sorted(data.items()):
        reasons = "<br>".join(r.replace("|", "\\|") for r in v["unsupported"]) or ""
        print(f"| {name} | {v['compiled']} | {reasons} |")


if __name__ == "__main__":
    main()

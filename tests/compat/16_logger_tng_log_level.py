"""torchair.logger and TNG_LOG_LEVEL as TorchAir users use them: TNG_LOG_LEVEL (0 debug,
1 info, 2 warning, 3 error, 4 event) set in the environment before `import torchair`, checked
for 0 and 4 in a fresh process each (the level, and which of logger.debug/info/warning/event/error
reach the output); logger.setLevel(logging.DEBUG) in code; logger.warning_once; and the
warning torchair logs through that logger when config.debug.run_eagerly is set, seen by a
handler the user attaches. The compiled function's result is checked against eager."""

import io
import logging
import os
import subprocess
import sys

import torch
import torchair
from torchair.configs.compiler_config import CompilerConfig
from torchair.core.utils import logger

NAME = "16_logger_tng_log_level"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

CHILD = r"""
import logging, sys
logging.basicConfig(stream=sys.stdout, format="%(levelname)s %(name)s %(message)s")
import torchair
from torchair.core.utils import logger
assert logger is torchair.logger and logger.name == "torchair"
print("LEVEL", logger.level)
logger.debug("m-debug")
logger.info("m-info")
logger.warning("m-warning")
logger.event("m-event")
logger.error("m-error")
"""

LEVELS = {"0": logging.DEBUG, "1": logging.INFO, "2": logging.WARNING, "3": logging.ERROR, "4": 35}
SHOWN = {
    "0": {"m-debug", "m-info", "m-warning", "m-event", "m-error"},
    "1": {"m-info", "m-warning", "m-event", "m-error"},
    "2": {"m-warning", "m-event", "m-error"},
    "3": {"m-error"},
    "4": {"m-event", "m-error"},
}


def main():
    # TNG_LOG_LEVEL, read at import: a fresh process per level, run side by side (0, the most
    # verbose, and 4, TorchAir's own EVENT level, which is above WARNING and below ERROR)
    procs = {
        value: subprocess.Popen(
            [sys.executable, "-c", CHILD], env={**os.environ, "TNG_LOG_LEVEL": value},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for value in ("0", "4")
    }  # fmt: skip
    for value, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stdout + stderr
        out = stdout.splitlines()
        level = LEVELS[value]
        got_level = int(next(line.split()[1] for line in out if line.startswith("LEVEL")))
        assert got_level == level, f"TNG_LOG_LEVEL={value}: logger level {got_level}, want {level}"
        shown = {line.split()[-1] for line in out if line.split()[-1].startswith("m-")}
        assert shown == SHOWN[value], f"TNG_LOG_LEVEL={value}: shown {sorted(shown)}, want {sorted(SHOWN[value])}"
        if value == "4":
            assert "EVENT torchair m-event" in stdout, stdout
        print(f"TNG_LOG_LEVEL={value}: level {got_level}, shown {sorted(shown)}")

    # in code, as TorchAir's docs show
    logger.setLevel(logging.DEBUG)
    assert logger.isEnabledFor(logging.DEBUG)
    captured = io.StringIO()
    handler = logging.StreamHandler(captured)
    handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
    logger.addHandler(handler)
    try:
        logger.warning_once("said once")
        logger.warning_once("said once")
        logger.event("an event")

        config = CompilerConfig()
        config.debug.run_eagerly = True
        fn = torch.compile(lambda x: torch.nn.functional.gelu(x) * 2, backend=torchair.get_npu_backend(compiler_config=config))
        x = torch.randn(4, 8, device=device)
        torch.testing.assert_close(fn(x), torch.nn.functional.gelu(x) * 2)
    finally:
        logger.removeHandler(handler)
    text = captured.getvalue()
    assert text.count("said once") == 1, text
    assert "[EVENT] an event" in text, text
    assert "run_eagerly" in text, f"no run_eagerly warning through torchair.logger:\n{text}"
    print(text.rstrip())
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()

"""TorchAir's option validation as users meet it: a wrong value, an unknown option name, an
out-of-range integer, a missing directory, a non-callable pass, a non-int list, a wrong mode.
Each must raise TorchAir's exception type when the option is set, and the message's first
line (what `print(e)` or a traceback's last line shows, and what `pytest.raises(match=...)`
or log scrapers see first) must be TorchAir's, e.g. "Value 'yes' (type: <class 'str'>) not in
optional list [True, False] (type: <class 'bool'>)." A valid config must still compile and
match eager."""

import torch
import torchair
from torchair.configs.compiler_config import CompilerConfig

NAME = "25_config_validation_errors"
device = torch.device("cpu")  # "npu" with torch_npu on Ascend

CASES = [
    # (assignment, exception type, TorchAir's first line starts with)
    ("config.debug.run_eagerly = 'yes'", ValueError,
     "Value 'yes' (type: <class 'str'>) not in optional list [True, False] (type: <class 'bool'>)."),
    ("config.ge_config.export_compile_stat = 2", ValueError, "Value 2 (type: <class 'int'>) not in optional list ['0', '1', '2']"),
    ("config.ge_config.oo_level = 'O2'", ValueError, "Value 'O2' (type: <class 'str'>) not in optional list ['O1', 'O3']"),
    ("config.experimental_config.foo = 1", ValueError, "_ExperimentalConfig has no option foo, all options ["),
    ("config.experimental_config.static_model_ops_lower_limit = 1.5", ValueError, "Please set integer type"),
    ("config.dump_config.dump_path = '/no/such/dir'", FileNotFoundError, "Please set legal dir path, /no/such/dir is not found"),
    ("config.post_grad_custom_pre_pass = 3", TypeError, "value must be Callable or None, got <class 'int'>"),
    ("config.mode = 'max_autotune'", ValueError, "Value 'max_autotune' (type: <class 'str'>) not in optional list ['max-autotune', 'reduce-overhead']"),
]  # fmt: skip


def main():
    failures = []
    for statement, exc_type, first_line in CASES:
        config = CompilerConfig()
        try:
            exec(statement, {"config": config})
        except Exception as e:  # noqa: BLE001
            got = str(e).splitlines()[0] if str(e) else ""
            if not isinstance(e, exc_type):
                failures.append(f"{statement}: {type(e).__name__}, TorchAir raises {exc_type.__name__}")
            elif not got.startswith(first_line):
                failures.append(f"{statement}:\n    first line: {got}\n    TorchAir's:  {first_line}...")
            else:
                print(f"{statement}: {exc_type.__name__}: {got[:90]}")
        else:
            failures.append(f"{statement}: accepted")

    # a valid config still works
    config = CompilerConfig()
    config.debug.run_eagerly = False
    config.ge_config.export_compile_stat = "0"
    fn = torch.compile(lambda x: torch.tanh(x) * 2, backend=torchair.get_npu_backend(compiler_config=config))
    x = torch.randn(4, 4, device=device)
    torch.testing.assert_close(fn(x), torch.tanh(x) * 2)

    assert not failures, "messages that differ from TorchAir's:\n" + "\n".join(failures)
    print(f"COMPAT OK {NAME}")


if __name__ == "__main__":
    main()

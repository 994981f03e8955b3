"""Runs one workload in every requested mode, in this process: references, compile
and first call, accuracy, interleaved timing, and the figures derived from them.
bench/isolate.py calls it in a child process per compiled mode (the default).
"""

from __future__ import annotations

import copy
import gc
import time
from typing import Any

from .accuracy import check_accuracy
from .modes import REDUCED_PRECISION_MODES, compile_mode
from .peak import Peak
from .timing import Budget, round_robin, summarize
from .workloads import Workload

MAX_ERROR_CHARS = 2000


def _err(stage: str, e: BaseException) -> str:
    msg = f"{stage}: {type(e).__name__}: {e}"
    return msg if len(msg) <= MAX_ERROR_CHARS else msg[:MAX_ERROR_CHARS] + " ..."


def _to_fp64(x: Any) -> Any:
    import torch

    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.to(torch.float64)
    return x


def _fp64_reference(model: Any, inputs: tuple[Any, ...]) -> tuple[Any, str | None]:
    """Eager output of a float64 copy of the model (None and a reason if that fails)."""
    import torch

    try:
        m64 = copy.deepcopy(model).to(torch.float64)
        out = m64(*(_to_fp64(x) for x in inputs))
        del m64
        return out, None
    except Exception as e:  # noqa: BLE001
        return None, _err("fp64 reference", e)


def _graph_count() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def run_workload(
    w: Workload, modes: list[str], budget: Budget, peak: Peak | None, threads: int, same_process: bool = True
) -> dict[str, Any]:
    """``same_process``: several compiled modes share this process (see modes.compile_mode)."""
    import torch

    res: dict[str, Any] = {
        "name": w.name,
        "kind": w.kind,
        "desc": w.desc,
        "flops": w.flops,
        "shape": w.extra or None,
        "modes": {},
        "error": None,
        "notes": [],
    }
    torch._dynamo.reset()
    gc.collect()
    with torch.no_grad():
        try:
            model, inputs = w.build()
        except Exception as e:  # noqa: BLE001
            res["error"] = _err("build", e)
            return res

        # Eager first: its first output is the fp32 reference.
        try:
            t0 = time.perf_counter()
            ref32 = model(*inputs)
            eager_first = time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001
            res["error"] = _err("eager run", e)
            return res
        ref64, why = _fp64_reference(model, inputs)
        if why:
            res["notes"].append(why)

        entries: dict[str, dict[str, Any]] = {}
        fns: dict[str, Any] = {}
        first_out: dict[str, Any] = {}
        for mode in modes:
            entry: dict[str, Any] = {"status": "ok", "error": None, "notes": []}
            entries[mode] = entry
            if mode == "eager":
                fns[mode], first_out[mode] = model, ref32
                entry["first_call_s"] = eager_first
                continue
            try:
                t0 = time.perf_counter()
                comp = compile_mode(mode, model, same_process=same_process)
                with comp.first_call_ctx():
                    out = comp.fn(*inputs)
                entry["first_call_s"] = time.perf_counter() - t0
                entry["notes"] += comp.notes
                if comp.check is not None:
                    more, broken = comp.check()
                    entry["notes"] += more
                    if broken:
                        entry.update(status="error", error=broken)
                        continue
            except Exception as e:  # noqa: BLE001
                entry.update(status="error", error=_err("compile/first call", e))
                continue
            fns[mode], first_out[mode] = comp.fn, out

        graphs_before = _graph_count()
        rr = round_robin({m: (lambda f=f: f(*inputs)) for m, f in fns.items()}, budget)
        if _graph_count() != graphs_before:
            res["notes"].append("a new graph was compiled during the timed runs (recompile); timings include it")

        for mode in fns:
            entry = entries[mode]
            if mode in rr.errors:
                entry.update(status="error", error=rr.errors[mode])
                continue
            st = summarize(rr.samples[mode])
            entry.update(iters=st.n, median_ms=st.median_ms, p10_ms=st.p10_ms, p90_ms=st.p90_ms, min_ms=st.min_ms)
            # The first output is checked only now, after many later calls: a result that
            # aliases a buffer the runtime reuses would have been overwritten by then.
            checks = [("first call", first_out[mode]), ("last timed call", rr.last_outputs.get(mode))]
            details = []
            ok_all = True
            for label, out in checks:
                ok, detail = check_accuracy(out, ref32, ref64)
                ok_all &= ok
                details.append(f"{label}: {detail}")
                if not ok:
                    break
            entry["accuracy"] = "; ".join(details)
            if mode in REDUCED_PRECISION_MODES:
                # Lower precision by design: measured and shown, not held to the fp32 rule.
                entry["accuracy_judged"] = False
                entry["accuracy_ok"] = ok_all
                continue
            entry["accuracy_ok"] = ok_all
            if not ok_all:
                entry["status"] = "wrong"

        eager_med = entries.get("eager", {}).get("median_ms")
        peak_gflops = peak.gflops(threads) if peak else None
        for entry in entries.values():
            med = entry.get("median_ms")
            if med and eager_med:
                entry["speedup"] = eager_med / med
            if med and w.flops:
                entry["gflops"] = w.flops / (med * 1e-3) / 1e9
                if peak_gflops:
                    entry["frac_peak"] = entry["gflops"] / peak_gflops
        res["modes"] = entries
        res["iters_budget"] = {
            "min_rounds": budget.min_rounds,
            "max_rounds": budget.max_rounds,
            "seconds": budget.seconds,
            "repeat": budget.repeat,
        }
    del model, fns, first_out, rr
    torch._dynamo.reset()
    gc.collect()
    return res

"""The dynamic-shapes benchmark's (bench/dynamic.py) summaries and Markdown report, and the
constants both describe: dynamo's recompile limit in its processes, the busy threshold, the
correctness tolerance, and how a shape is written."""

from __future__ import annotations

import math
import statistics
from typing import Any

RECOMPILE_LIMIT = 64
BUSY_PCT = 10.0  # others' share of the CPUs above which a mode's process is run again (--retry-busy)
RTOL = ATOL = 1e-3

def shape_key(shape: tuple[int, ...] | list[int]) -> str:
    return "x".join(map(str, shape))


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def summarize_workload(results: list[dict[str, Any]], ab: dict[str, Any] | None = None) -> dict[str, Any]:
    """Per mode: worst ratio to eager and its shape, geomean ratio, correctness; per shape:
    torchair_dynamic / torchair_static (raw, and of their ratios to their own eager; and, given
    the A/B process's result, the two taking turns in one process)."""
    out: dict[str, Any] = {"modes": {}, "cliff": {}}
    by = {r["mode"]: r for r in results if "error" not in r}
    for m, r in by.items():
        rows = {k: v for k, v in r["shapes"].items() if "ratio" in v}
        worst = max(rows, key=lambda k: rows[k]["ratio"]) if rows else None
        wrong = [k for k, v in r["shapes"].items() if v.get("allclose") is False]
        out["modes"][m] = {
            "worst_ratio": rows[worst]["ratio"] if worst else None, "worst_shape": worst,
            "geomean_ratio": _geomean([v["ratio"] for v in rows.values()]),
            "wrong_shapes": wrong, "failed_shapes": sorted(r.get("errors", {})),
            "max_abs_diff": max((v.get("max_abs_diff", 0.0) for v in r["shapes"].values()), default=None),
        }
    dyn, sta = by.get("torchair_dynamic"), by.get("torchair_static")
    if dyn and sta:
        for k, d in dyn["shapes"].items():
            s = sta["shapes"].get(k, {})
            if "ms" in d and "ms" in s:
                out["cliff"][k] = {"raw": round(d["ms"] / s["ms"], 4), "vs_own_eager": round(d["ratio"] / s["ratio"], 4)}
    if ab and "error" not in ab:
        for k, v in ab.get("shapes", {}).items():
            out["cliff"].setdefault(k, {})["same_process"] = v["ratio"]
        same = [c["same_process"] for c in out["cliff"].values() if "same_process" in c]
        if same:
            out["cliff_worst_same_process"] = max(same)
            out["cliff_geomean_same_process"] = _geomean(same)
            out["cliff_worst_same_process_shape"] = max(ab["shapes"], key=lambda k: ab["shapes"][k]["ratio"])
    elif ab:
        out["ab_error"] = ab["error"][-1000:]
    if dyn and sta:
        raws = [c["raw"] for c in out["cliff"].values() if "raw" in c]
        norms = [c["vs_own_eager"] for c in out["cliff"].values() if "vs_own_eager" in c]
        if raws:
            out["cliff_worst_raw"] = max(raws)
            out["cliff_worst_vs_own_eager"] = max(norms)
            out["cliff_geomean_raw"] = _geomean(raws)
            out["cliff_geomean_vs_own_eager"] = _geomean(norms)
    return out


def text_of(x: Any) -> str:
    return x.decode(errors="replace") if isinstance(x, bytes) else str(x or "")


def _last_line(text: str, first: bool = False) -> str:
    lines = text.strip().splitlines()
    return (lines[0] if first else lines[-1]) if lines else "?"


def _f(x: Any, nd: int = 2) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def markdown(meta: dict[str, Any], results: dict[str, list[dict[str, Any]]], summary: dict[str, Any],
             workloads: dict[str, dict[str, Any]], ab: dict[str, dict[str, Any]] | None = None) -> str:
    """The report; workloads: bench/dynamic.py's WORKLOADS (their titles and streams)."""
    cpu = meta["cpu"]
    ab_info = {w: r.get("others_cpu_pct") for w, r in (ab or {}).items()}
    la0, la1 = meta["load_average_start"], meta["load_average_end"]
    L = [f"# Dynamic shapes: a stream of mixed shapes per mode{' (--quick)' if meta['quick'] else ''}", "",
         f"{meta['date']}, commit {(meta['git']['commit'] or '?')[:10]}{' (dirty tree)' if meta['git']['dirty'] else ''}, "
         f"{cpu['model']} ({cpu['logical_cpus']} CPUs, {'AVX-512' if cpu['avx512'] else 'no AVX-512'}), "
         f"{meta['threads']} threads, torch {meta['versions']['torch']}, transformers {meta['versions']['transformers']}, "
         f"torchair {meta['versions']['torchair']}", "",
         f"Command: `{meta['command']}`; took {meta['took_s']:.0f} s; load average {la0} at the start, {la1} at the end "
         f"(per process in the JSON).", "",
         "Each mode ran in a process of its own per workload, eager timed in turn with it there; **ratio = the mode's "
         "median latency / eager's in the same process (eager = 1, lower is faster)**. graphs: dynamo graphs over the "
         "stream (`counters['stats']['unique_graphs']`); air: ATen graphs torchair compiled. compile s: dynamo's "
         "`_compile.compile_inner` total / first-call overheads (each shape's first call minus its median, summed). "
         f"Dynamo's recompile_limit was {RECOMPILE_LIMIT} (default 8). Correct: every checked output allclose to eager "
         f"(rtol=atol={RTOL:g}) at every shape, checked at each stream step and on the last timed call. others' CPU %: the "
         "share of the machine's CPU time that processes other than the mode's own took while it ran (/proc/stat): "
         "above a few percent, its latencies were measured beside other work.", ""]
    busy = [f"{r['workload']}/{r['mode']} ({r['others_cpu_pct']:.0f}%)" for rs in [*results.values(), list((ab or {}).values())]
            for r in rs if (r.get("others_cpu_pct") or 0.0) > BUSY_PCT]
    if busy:
        L += [f"**Warning: other processes took more than {BUSY_PCT:g}% of the CPUs while these ran: {', '.join(busy)}; "
              "their ratios are not worth quoting.**", ""]
    for w, rs in results.items():
        spec = workloads[w]
        title = spec.get("quick_title", spec["title"]) if meta["quick"] else spec["title"]
        ok_rs = [r for r in rs if "error" not in r]
        st = ok_rs[0]["stream"] if ok_rs else []
        L += [f"## {w}: {title}", "", "Stream: " + ", ".join(shape_key(x["shape"]) for x in st), ""]
        L += ["| mode | graphs (air) | recompiled at | compile s (dynamo / first call) | median ms over shapes | "
              "geomean ratio | worst ratio to eager | worst shape | correct | max abs diff | fallback ops | others' CPU % |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        sm = summary[w]
        for r in rs:
            m = r["mode"]
            if "error" in r:
                L.append(f"| {m} | failed: {_last_line(r['error'])[:160]} |" + " |" * 10)
                continue
            s = sm["modes"][m]
            ms = [v["ms"] for v in r["shapes"].values() if "ms" in v]
            graphs = f"{r['graphs']}" + (f" ({r['air_graphs']})" if r.get("air_graphs") is not None else "")
            rec = ", ".join(r["recompile_steps"]) if r["recompile_steps"] else "–"
            if m == "eager":
                graphs, rec = "0", "–"
            correct = "–" if m == "eager" else ("yes" if not s["wrong_shapes"] and not s["failed_shapes"] else
                                                "**WRONG** " + ", ".join(s["wrong_shapes"]) + (
                                                    (" failed " + ", ".join(s["failed_shapes"])) if s["failed_shapes"] else ""))
            fb = r.get("air_fallback_ops")
            fbs = "–" if not fb else ", ".join(f"{k} x{v}" for k, v in sorted(fb.items()))
            diff = "–" if m == "eager" else f"{s['max_abs_diff']:.2e}"
            L.append(f"| {m} | {graphs} | {rec} | {_f(r['compile_s_dynamo'], 1)} / {_f(r['compile_s_first_call'], 1)} | "
                     f"{_f(statistics.median(ms), 1) if ms else '–'} | {_f(s['geomean_ratio'])} | {_f(s['worst_ratio'])} | "
                     f"{s['worst_shape'] or '–'} | {correct} | {diff} | {fbs} | {_f(r.get('others_cpu_pct'), 0)} |")
        modes = [r["mode"] for r in ok_rs]
        shapes = list(ok_rs[0]["shapes"]) if ok_rs else []
        if shapes:
            cl = sm.get("cliff", {})
            L += ["", "Per shape: eager ms (eager's own process) and each mode's ratio to the eager of its process; "
                  "dyn/static: torchair_dynamic's median / torchair_static's (target <= 1.10), from **their two processes** "
                  "(raw, and of their ratios to their own eager), and from one process where the two took turns call by "
                  "call on two copies of the model (`--one torchair_ab`, after the same stream): the one without the "
                  "drift between processes.", ""]
            head = ["shape", "eager ms"] + modes[1:] + ["dyn/static raw", "dyn/static vs own eager", "dyn/static same process"]
            L += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            by = {r["mode"]: r for r in ok_rs}
            for k in shapes:
                cells = [k, _f(by["eager"]["shapes"].get(k, {}).get("ms"), 1) if "eager" in by else "–"]
                for m in modes[1:]:
                    v = by[m]["shapes"].get(k, {})
                    c = _f(v.get("ratio")) if "ratio" in v else ("failed" if k in by[m].get("errors", {}) else "–")
                    if v.get("allclose") is False:
                        c += " (wrong)"
                    cells.append(c)
                c = cl.get(k)
                c = c or {}
                cells += [_f(c.get("raw")), _f(c.get("vs_own_eager")), _f(c.get("same_process"))]
                L.append("| " + " | ".join(cells) + " |")
            L += ["", "Per shape ms (median; eager's of the same process in brackets):", "",
                  "| shape | " + " | ".join(modes) + " |", "|" + "---|" * (len(modes) + 1)]
            for k in shapes:
                cells = [k]
                for m in modes:
                    v = by[m]["shapes"].get(k, {})
                    if "ms" not in v:
                        cells.append("–")
                    else:
                        cells.append(_f(v["ms"], 1) if m == "eager" else f"{_f(v['ms'], 1)} ({_f(v['eager_ms'], 1)})")
                L.append("| " + " | ".join(cells) + " |")
            if "cliff_worst_raw" in sm:
                line = (f"torchair_dynamic / torchair_static: worst {_f(sm['cliff_worst_raw'])} raw, "
                        f"{_f(sm['cliff_worst_vs_own_eager'])} against their own eager (two processes); geomean "
                        f"{_f(sm['cliff_geomean_raw'])} / {_f(sm['cliff_geomean_vs_own_eager'])}")
                if "cliff_worst_same_process" in sm:
                    line += (f"; in one process: worst {_f(sm['cliff_worst_same_process'])} "
                             f"({sm['cliff_worst_same_process_shape']}), geomean {_f(sm['cliff_geomean_same_process'])}")
                    if ab_info.get(w) is not None:
                        line += f" (others' CPU {_f(ab_info[w], 0)}%)"
                L += ["", line + "."]
            if "ab_error" in sm:
                L += ["", f"The same-process A/B failed: `{_last_line(sm['ab_error'])[:300]}`"]
        errs = [(r["mode"], k, e) for r in ok_rs for k, e in r.get("errors", {}).items()]
        if errs:
            L += ["", "Errors:", ""] + [f"- {m} at {k}: `{_last_line(e, first=True)[:300]}`" for m, k, e in errs]
        L.append("")
    return "\n".join(L) + "\n"

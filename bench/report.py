"""Writes a run's results: JSON (everything), Markdown tables, and a PNG speedup chart."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def _f(x: Any, fmt: str = "{:.2f}") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return fmt.format(x)


def _acc(e: dict[str, Any]) -> str:
    if e.get("status") == "error":
        return "error"
    if "accuracy_ok" not in e:
        return "–"
    if e.get("accuracy_judged") is False:
        # A mode that computes in lower precision by design (OpenVINO's default: bf16).
        return "not judged: lower precision (" + ("within" if e["accuracy_ok"] else "outside") + " the fp32 rule)"
    return "ok" if e["accuracy_ok"] else "**WRONG**"


def _eager_ms(e: dict[str, Any]) -> str:
    """Eager's median in the mode's own process (isolated runs), or in the one shared process."""
    return _f(e.get("eager_median_ms"))


def _model_table(rows: list[dict[str, Any]], memory: bool) -> list[str]:
    head = "| workload | mode | median ms | p10 | p90 | eager ms, same process | speedup | first call s | accuracy |"
    sep = "|---|---|---:|---:|---:|---:|---:|---:|---|"
    if memory:
        head += " peak RSS MB | RSS after import torch MB | RSS after build MB |"
        sep += "---:|---:|---:|"
    out = [head, sep]
    for w in rows:
        for mode, e in w["modes"].items():
            line = (
                f"| {w['name']} | {mode} | {_f(e.get('median_ms'))} | {_f(e.get('p10_ms'))} | {_f(e.get('p90_ms'))} "
                f"| {_eager_ms(e)} | {_f(e.get('speedup'), '{:.2f}x')} | {_f(e.get('first_call_s'))} | {_acc(e)} |"
            )
            if memory:
                m = e.get("memory") or {}
                line += (
                    f" {_f(m.get('peak_rss_mb'), '{:.0f}')} | {_f(m.get('rss_after_import_mb'), '{:.0f}')}"
                    f" | {_f(m.get('rss_after_build_mb'), '{:.0f}')} |"
                )
            out.append(line)
    return out


def _kernel_table(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        "| kernel | shape | mode | median ms | GFLOP/s | % of peak | speedup | accuracy |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    for w in rows:
        for mode, e in w["modes"].items():
            frac = e.get("frac_peak")
            out.append(
                f"| {w['name']} | {w['desc']} | {mode} | {_f(e.get('median_ms'), '{:.3f}')} | {_f(e.get('gflops'), '{:.1f}')} "
                f"| {_f(frac * 100 if frac is not None else None, '{:.0f}%')} | {_f(e.get('speedup'), '{:.2f}x')} | {_acc(e)} |"
            )
    return out


def _eager_spread(rows: list[dict[str, Any]]) -> list[str]:
    """Eager's median in each process of an isolated run, per workload."""
    out = []
    for w in rows:
        e = w["modes"].get("eager") or {}
        procs = e.get("eager_processes") or []
        if len(procs) > 1:
            each = ", ".join(f"{p['median_ms']:.2f} (with {p['with']})" for p in procs)
            out.append(f"- `{w['name']}`: eager ms per process {each}; spread {100 * e['eager_spread']:.1f}%")
    return out


def oneline(s: str, limit: int = 300) -> str:
    """An error message on one line: its first few non-empty lines joined."""
    lines = [ln.strip() for ln in s.splitlines() if ln.strip()]
    text = " / ".join(lines[:4])
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _problems(results: dict[str, Any]) -> list[str]:
    out = []
    for w in results["workloads"]:
        if w.get("error"):
            out.append(f"- `{w['name']}`: {oneline(w['error'])}")
        for mode, e in w["modes"].items():
            if e.get("status") == "error":
                out.append(f"- `{w['name']}` / {mode}: {oneline(e.get('error') or '')}")
            elif e.get("status") == "wrong":
                out.append(f"- `{w['name']}` / {mode}: WRONG ANSWER: {oneline(e.get('accuracy', ''))}")
            mem_err = (e.get("memory") or {}).get("error")
            if mem_err:
                out.append(f"- `{w['name']}` / {mode} (memory run): {oneline(mem_err)}")
        for note in w.get("notes", []):
            out.append(f"- `{w['name']}`: note: {oneline(note)}")
    return out


def _busy_warning(results: dict[str, Any]) -> list[str]:
    # Only the load before the run started: the run itself adds about `threads` to later readings.
    cpus = results["machine"].get("affinity_cpus") or results["machine"].get("logical_cpus") or 1
    load = (results.get("load_start") or [0.0])[0]
    if load > 0.5 * cpus:
        return [
            (
                f"**Warning: the machine was busy when this run started (1-minute load average {load:.1f}"
                f" on {cpus} CPUs). Absolute figures are unreliable; the interleaved runs keep the modes"
                " roughly comparable with each other.**"
            ),
            "",
        ]
    return []


def _peak_line(peak: dict[str, Any]) -> list[str]:
    if not peak:
        return []
    if peak.get("error"):
        return [f"- fp32 FMA peak: not measured ({oneline(peak['error'])})"]
    return [
        (
            f"- fp32 FMA peak (bench/peak_probe.c, {peak.get('isa')}): {_f(peak.get('gflops_1thread'), '{:.1f}')} GFLOP/s"
            f" on 1 thread, {_f(peak.get('gflops_nthreads'), '{:.1f}')} on {peak.get('threads')};"
            " % of peak uses the figure for the run's thread count"
            + (
                "; torchair's large f32 GEMMs run on AMX tiles as three-part bf16 products with f32 sums"
                " (docs/design.md), which can exceed this f32 FMA peak"
                if results_isa(peak) == "amx"
                else ""
            )
        )
    ]


def results_isa(peak: dict[str, Any]) -> str | None:
    """The ISA torchair's kernels ran with (torchair._C.isa()), as the run recorded it."""
    return peak.get("torchair_isa")


def markdown(results: dict[str, Any], png_name: str | None) -> str:
    m, peak = results["machine"], results.get("peak") or {}
    lines = [
        f"# torchair benchmark: {results['name']}",
        "",
        (
            f"- date: {results['date']}; git commit: `{(results['git'].get('commit') or 'none')[:12]}`"
            f"{' (uncommitted changes)' if results['git'].get('dirty') else ''}"
        ),
        f"- machine: {m['model']}, {m['logical_cpus']} logical CPUs, flags: {' '.join(m['flags']) or 'none'}",
        (
            f"- threads: {results['threads']}; torch {results['versions']['torch']}; "
            f"load average at start/end: {results.get('load_start')} / {results.get('load_end')}"
        ),
        *_peak_line(peak),
        f"- {results['command']}; took {results['wall_s']:.0f} s",
        f"- isolation: {results.get('isolation', 'one process for all modes')}",
        "",
        *_busy_warning(results),
        f"Median/p10/p90 latency over interleaved runs (modes take turns {results.get('turns', 'run by run')}); "
        "speedup = eager median / mode median, eager timed in the same process as the mode;",
        "first call = compile + first run; accuracy = SPEC section 4 rule against eager fp32/fp64.",
        "",
    ]
    models = [w for w in results["workloads"] if w["kind"] == "model" and w["modes"]]
    kernels = [w for w in results["workloads"] if w["kind"] == "kernel" and w["modes"]]
    if models:
        lines += ["## Models", "", *_model_table(models, results.get("memory", False)), ""]
        if results.get("memory"):
            lines += ["Peak RSS: VmHWM (peak resident set) of a fresh process per mode (interpreter + weights + compile + runs).", ""]
        spread = _eager_spread(models)
        if spread:
            lines += ["Eager in each mode's process (the row of eager above is their median):", "", *spread, ""]
    if kernels:
        lines += [
            "## Kernels (batch 1 shapes from ResNet-50 and BERT-base, plus square GEMMs)",
            "",
            *_kernel_table(kernels),
            "",
        ]
        spread = _eager_spread(kernels)
        if spread:
            lines += ["Eager in each mode's process (the row of eager above is their median):", "", *spread, ""]
    probs = _problems(results)
    if probs:
        lines += ["## Errors, wrong answers and notes", "", *probs, ""]
    if png_name:
        lines += [f"![speedup per workload and mode]({png_name})", ""]
    return "\n".join(lines)


def chart(results: dict[str, Any], path: Path) -> str | None:
    """Bar chart of speedup over eager per workload and mode. Returns an error string, or None."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return f"no chart: {e}"
    groups = [
        ("models", [w for w in results["workloads"] if w["kind"] == "model" and w["modes"]]),
        ("kernels", [w for w in results["workloads"] if w["kind"] == "kernel" and w["modes"]]),
    ]
    groups = [(g, ws) for g, ws in groups if ws]
    if not groups:
        return "no chart: nothing was measured"
    modes = [m for m in results["modes"] if m != "eager"] or ["eager"]
    fig, axes = plt.subplots(
        len(groups),
        1,
        figsize=(max(8.0, 0.5 * max(len(ws) for _, ws in groups) * len(modes)), 4.5 * len(groups)),
        squeeze=False,
    )
    width = 0.8 / len(modes)
    for ax, (title, ws) in zip(axes[:, 0], groups, strict=True):
        for i, mode in enumerate(modes):
            xs, ys, bad = [], [], []
            for j, w in enumerate(ws):
                e = w["modes"].get(mode)
                x = j + (i - (len(modes) - 1) / 2) * width
                if e and e.get("speedup"):
                    xs.append(x)
                    ys.append(e["speedup"])
                elif e is not None:
                    bad.append(x)  # failed to compile/run: marked, not drawn as a bar
            ax.bar(xs, ys, width, label=mode)
            if bad:
                ax.plot(bad, [0.05] * len(bad), "x", color="red", label=f"{mode} failed")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_ylim(bottom=0)
        ax.set_xlim(-0.6, len(ws) - 0.4)
        ax.set_xticks(range(len(ws)))
        ax.set_xticklabels(
            [w["name"] for w in ws],
            rotation=45 if len(ws) > 4 else 0,
            ha="right" if len(ws) > 4 else "center",
            fontsize=8,
        )
        ax.set_ylabel("speedup over eager (x)")
        ax.set_title(f"{title}: {results['machine']['model']}, {results['threads']} threads")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def write(results: dict[str, Any], out_dir: Path = RESULTS, refresh_latest: bool = True) -> list[Path]:
    """Write NAME.json, NAME.md, NAME.png and (unless ``refresh_latest`` is False) latest.md."""
    out_dir.mkdir(parents=True, exist_ok=True)
    name = results["name"]
    png = out_dir / f"{name}.png"
    chart_err = chart(results, png)
    if chart_err:
        results.setdefault("notes", []).append(chart_err)
    js = out_dir / f"{name}.json"
    js.write_text(json.dumps(results, indent=1, sort_keys=False, default=str) + "\n")
    md_text = markdown(results, None if chart_err else png.name)
    md = out_dir / f"{name}.md"
    md.write_text(md_text + "\n")
    paths = [js, md] + ([] if chart_err else [png])
    if refresh_latest:
        latest = out_dir / "latest.md"
        latest.write_text(md_text + f"\n(Copied from `{name}.md`; raw figures in `{name}.json`.)\n")
        paths.append(latest)
    return paths

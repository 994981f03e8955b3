"""The benchmark's interleaved timing (bench/timing.py): run by run, every
mode takes one timed call per round; with repeat=2 (``python -m bench
--pairs``) each turn is two calls of one mode and only the second is timed,
so no timed call directly follows another mode's."""

from __future__ import annotations

from bench.timing import Budget, round_robin


def _recorder(log: list[str], name: str):
    def fn() -> str:
        log.append(name)
        return name

    return fn


def test_run_by_run_alternates_every_call():
    log: list[str] = []
    rr = round_robin({k: _recorder(log, k) for k in ("a", "b")}, Budget(3, 3, 0.0, warmup=0))
    assert log == ["a", "b"] * 3
    assert [len(rr.samples[k]) for k in ("a", "b")] == [3, 3]


def test_pairs_time_the_second_call_of_each_turn():
    log: list[str] = []
    rr = round_robin({k: _recorder(log, k) for k in ("a", "b")}, Budget(3, 3, 0.0, warmup=1, repeat=2))
    # one warm-up call each, then three rounds of two calls per mode
    assert log == ["a", "b"] + ["a", "a", "b", "b"] * 3
    assert [len(rr.samples[k]) for k in ("a", "b")] == [3, 3]


def test_a_failing_mode_leaves_the_rotation_in_pairs():
    log: list[str] = []
    calls = {"n": 0}

    def flaky() -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise ValueError("third call fails")

    rr = round_robin({"a": _recorder(log, "a"), "b": flaky}, Budget(3, 3, 0.0, warmup=0, repeat=2))
    assert "b" in rr.errors and "third call fails" in rr.errors["b"]
    assert len(rr.samples["a"]) == 3 and len(rr.samples["b"]) == 1

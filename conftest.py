# Makes the repository root importable in tests (for bench.accuracy, the
# shared SPEC.md section 4 check).

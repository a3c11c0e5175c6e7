"""heaptrail's test suite, run by tests/run_tests.py: harness.py (results,
running, fresh directories), specs.py (the programs' @ comments),
valgrind.py (the oracle), e2e.py (vg:, ht:, kinds:, delta:), cli.py
(report:, cli:), prof.py (prof:), core.py (the Suite)."""

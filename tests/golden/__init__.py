"""Plans and templates recorded for a fixed set of inputs, so a reshaping of the code can show
that it changed no behaviour: `python -m tests.golden.record` writes them, test_golden compares."""

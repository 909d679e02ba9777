"""Bad options of `python -m bench.predict`'s held-out protocol, each refused before anything is
measured or drawn."""

from __future__ import annotations

from tests.bad_inputs.case import Case


def predict(*args: str, says: str) -> Case:
    return Case("predict", args, 2, says)


CASES = [
    predict("--held-out", "0", says="bad --held-out 0: expected a whole number ≥ 1"),
    predict("--held-out", "two", says="argument --held-out: invalid int value: 'two'"),
    predict("--seed", "3", says="bad --seed 3: only a held-out run (--held-out N) takes it"),
    predict("--held-out", "2", "--seed", "-1", says="bad --seed -1: expected a whole number ≥ 0"),
    predict("--held-out", "2", "--seed", "x", says="argument --seed: invalid int value: 'x'"),
    predict("--held-out", "2", "--quick",
            says="bad --held-out 2: it draws its own configurations, so --quick does not apply"),
    predict("--held-out", "2", "--only", "digits-mlp",
            says="bad --held-out 2: it draws its own configurations, so --only does not apply"),
    predict("--held-out", "2", "--rescore",
            says="bad --held-out 2: it draws its own configurations, so --rescore does not apply"),
    predict("--rescore-held-out", "nope.json",
            says="bad --rescore-held-out 'nope.json': expected a held-out run's results file, "
                 "bench/results/hosts/<host-id>/predict-heldout.json"),
    predict("--held-out", "2", "--repeats", "0",
            says="bad --repeats 0: expected a whole number ≥ 1"),
]  # fmt: skip

"""Bad inputs to `python -m emulator.profile`."""

from __future__ import annotations

from tests.bad_inputs.case import prof

CASES = [
    # python -m emulator.profile --model FILE:FUNCTION --dataset PATH (a new profile)
    prof("--model", "tests/fixtures/models/broken.py:build", "--dataset", "builtin:digits",
         says="model file tests/fixtures/models/broken.py does not import: ModuleNotFoundError: "
         "No module named 'not_installed_anywhere'", given="broken.py imports a missing module"),
    prof("--model", "tests/fixtures/models/wrong.py:build", "--dataset", "builtin:digits",
         says="model tests/fixtures/models/wrong.py:build returned int, expected a torch.nn.",
         given="build returns 42"),
    prof("--model", "tests/fixtures/models/wrong.py:five_classes", "--dataset", "builtin:digits",
         says="outputs (2, 5) for a batch shaped (2, 1, 8, 8); the labels need (2, 10)",
         given="five_classes: 5 scores; digits has 10 classes"),
    prof("--model", "tests/fixtures/models/wrong.py:absent", "--dataset", "builtin:digits",
         says="model file tests/fixtures/models/wrong.py has no function 'absent'; it defines: "),
    prof("--model", "/home/me/model.py:build", "--dataset", "builtin:digits",
         says="the file must be a path inside the project folder, relative to it"),
    prof("--model", "mlp", says="--model needs --dataset: a dataset path in the project, or s3://"),
    prof("--model", "mlp", "--dataset", "/data/cats",
         says="bad --dataset '/data/cats': expected a path relative to the project folder"),
    prof("--model", "mlp", "--dataset", "runs/no-such-folder",
         says="bad source"),
    prof("--model", "mlp", "--dataset", "builtin:digits", "--epochs", "0",
         says="bad --epochs 0: expected a whole number, 1 or more"),
    prof("--workload", "digits-mlp", "--pairs", "0",
         says="bad --pairs 0: expected a whole number of at least 1"),
    prof("--model", "mlp", "--workload", "digits-mlp",
         says="give --workload (re-measure a profile) or --model with --dataset (a new one)"),
]  # fmt: skip

"""Bad inputs to `python -m emulator.profile`."""

from __future__ import annotations

from tests.bad_inputs.case import prof

DIGITS = ("--workload", "digits-mlp")
WHOLE = "a whole number, 1 or more"
# option, what it accepts, (value given, as the error shows it)
NUMBERS = [
    ("--epochs", WHOLE, [("-1", "-1"), ("abc", "'abc'"), ("1.5", "'1.5'"), ("nan", "'nan'")]),
    ("--batch", WHOLE, [("0", "0"), ("-4", "-4"), ("abc", "'abc'"), ("nan", "'nan'")]),
    ("--learning-rate", "a finite number > 0",
     [("0", "0.0"), ("-0.1", "-0.1"), ("nan", "nan"), ("inf", "inf"), ("fast", "'fast'")]),
    ("--momentum", "a number in [0, 1)",
     [("1", "1.0"), ("-0.5", "-0.5"), ("nan", "nan"), ("abc", "'abc'")]),
    ("--measure-s", "seconds, more than 0 and at most 120",
     [("0", "0.0"), ("-1", "-1.0"), ("nan", "nan"), ("inf", "inf"), ("1000", "1000.0"),
      ("abc", "'abc'")]),
    ("--repeats", WHOLE, [("0", "0"), ("-2", "-2"), ("abc", "'abc'"), ("nan", "'nan'")]),
    ("--pairs", "a whole number of at least 1", [("-1", "-1"), ("abc", "'abc'"), ("nan", "'nan'")]),
]  # fmt: skip

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
    # a dataset or a model file that breaks as it is read
    prof("--model", "mlp", "--dataset", "tests/fixtures/datasets/corrupt-npz",
         says="cannot read 'part-0.npz': BadZipFile: File is not a zip file",
         given="part-0.npz: the first half of a valid .npz"),
    prof("--model", "tests/fixtures/models/exits.py:build", "--dataset", "builtin:digits",
         says="model tests/fixtures/models/exits.py:build failed to build for input (1, 8, 8) "
         "and 10 classes: SystemExit: sys.exit(0) called", given="build calls sys.exit(0)"),
    prof("--model", "tests/fixtures/models/exits.py:in_forward", "--dataset", "builtin:digits",
         says="model tests/fixtures/models/exits.py:in_forward fails on a batch of inputs shaped "
         "(2, 1, 8, 8): SystemExit: sys.exit(0) called", given="forward calls sys.exit(0)"),
    prof("--model", "tests/fixtures/models/exits_on_import.py:build", "--dataset",
         "builtin:digits", says="model file tests/fixtures/models/exits_on_import.py does not "
         "import: SystemExit: sys.exit(0) called", given="the file calls sys.exit(0)"),
    # where the profile goes: checked before any profiling
    prof(*DIGITS, "--output", "{dir}", says="a folder; expected the path of a .json file to "
         "write the profile to", given="the scratch folder"),
    prof(*DIGITS, "--output", "{dir}/a-file/p.json", says="is a file, not a folder; expected "
         "the path of a .json file", given="a-file is a file"),
    # every number option: 0, negative, not a number, NaN, past its bound
    *(prof(*DIGITS, option, value, says=f"bad {option} {shown}: expected {expected}")
      for option, expected, values in NUMBERS for value, shown in values),
    *(prof(*DIGITS, "--shares", value, says=f"bad --shares '{value}': expected positive "
           "numbers up to") for value in ("0", "-1", "nan", "abc", "0.5,inf")),
]  # fmt: skip

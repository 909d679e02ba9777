"""Bad inputs to `python -m bench.lab.catalog_from_runs`."""

from __future__ import annotations

from tests.bad_inputs.case import Case, slack_case

CASES = [
    # --slack-from RUNS (the catalog's slack from finished runs)
    slack_case("local.json", "no-terms.json", "is neither a run report (terms) nor bench."
               "predict results (rows)", "no-terms.json: a job summary, not a run report"),
    slack_case("local.json", "interrupted.json", "holds no finished run predicted for this "
               "machine", 'interrupted.json: status "interrupted"'),
    slack_case("missing.json", "interrupted.json", "cannot be read (FileNotFoundError): "
               "--slack-from updates a catalog", 'interrupted.json: status "interrupted"'),
    # --interval-from RUNS (the catalog's 90% prediction interval from finished runs)
    slack_case("local.json", "no-terms.json", "is neither a run report (terms) nor bench."
               "predict results (rows)", "no-terms.json: a job summary, not a run report",
               option="--interval-from"),
    slack_case("local.json", "interrupted.json", "holds no finished run predicted for this "
               "machine",
               'interrupted.json: status "interrupted"', option="--interval-from"),
    Case("catalog_from_runs", ("--out", "{dir}/local.json", "--interval-from",
         "{dir}/cnn-run.json", "--slack-from", "{dir}/cnn-run.json"), 2,
         "--interval-from and --slack-from both set the deadline's reserve: give one",
         given="cnn-run.json: a finished run"),
    # --init-cores-from RUNS (start-up cores from finished runs)
    slack_case("local.json", "no-terms.json", "is neither a run report (terms) nor bench."
               "predict results (rows)", "no-terms.json: a job summary, not a run report",
               option="--init-cores-from"),
    slack_case("local.json", "interrupted.json", "holds no finished run with a measured "
               "start-up", 'interrupted.json: status "interrupted"', option="--init-cores-from"),
]  # fmt: skip

"""Bad inputs to `cdk synth -c key=value`."""

from __future__ import annotations

from tests.bad_inputs.case import cdk

CASES = [
    # cdk synth -c key=value
    cdk("job=../../victim", says="job='../../victim' is not a job name"),
    cdk("dataset=synthetic-cifar:99999999999999",
        says="dataset='synthetic-cifar:99999999999999' is not accepted"),
    cdk("dataset=synthetic-cifar:4096",
        says="gives 3×32×32 inputs but workload 'digits-mlp' was profiled on digits (1×8×8)"),
    cdk("deadline=bogus", says="deadline='bogus' is not accepted"),
    cdk("budget=5", "slack=10%", says="only a budget was given: add a deadline or drop the slack"),
    cdk("max_memory_mb=64", says="max_memory_mb='64' is out of range"),
    cdk("arch=sparc", says="arch='sparc' is not accepted; use one of x86_64, arm64, mixed, any"),
    cdk("ps_types=,,,", says="ps_types=',,,' is not accepted"),
    cdk("replan=maybe", says="replan='maybe' is not accepted; use one of off, scale-down, on"),
    cdk("replan=", says="replan='' is empty; give a value"),
    cdk("replan_ceiling=0", says="replan_ceiling='0' is out of range; use an integer from 1 to 16"),
    cdk("workload=nope", says="workload='nope': profile 'nope' not found"),
    cdk("reserve_concurency=true", says="reserve_concurency='true' is not a context key"),
    cdk("workload={dir}/latin1.json", says="latin1.json' is not UTF-8 text",
        given="latin1.json: Latin-1 bytes"),
    cdk("deadline=", says="deadline='' is empty; give a value"),
    cdk("budget=", "deadline=1h", says="budget='' is empty; give a value"),
    cdk("ps_types=", says="ps_types='' is empty; give a value"),
    cdk("max_concurrency= ", says="max_concurrency=' ' is empty; give a value"),
    cdk("catalog=local", "sync=ps", says="catalog='local': catalog 'local' is this machine's, "
        "for the emulator (python -m emulator), not an AWS catalog"),
    cdk("catalog={dir}/local-catalog.json", says="catalog 'local' is this machine's, for the "
        "emulator", given="local-catalog.json: a local catalog (name local)"),
    cdk("workload={dir}/etc-name.json", says="profile field 'name': profile name '../../etc/x' "
        "is not accepted", given="etc-name.json: name ../../etc/x"),
    cdk("workload={dir}/no-data.json", says="profile field 'dataset': dataset "
        "'data/no-such-folder' does not exist", given="no-data.json: dataset data/no-such-folder"),
]  # fmt: skip

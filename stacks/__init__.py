"""The job's CDK stacks, built from a Plan: data, network + parameter servers, training.

`stacks.context` is the only module that reads CDK context; `stacks.job.add_job_stacks` composes
the stacks; everything else is one construct per concern.
"""

"""Jobs: rlvr on a Ray cluster through the Jobs API.

submit (`rlvr submit`), job_control (`rlvr status` / `logs` / `stop`), driver (the job's driver,
`python -m rlvr_launch.jobs.driver`), pipeline_driver (a pipeline job's driver,
`python -m rlvr_launch.jobs.pipeline_driver`). Imports pipelines, runs, recipes and data.
"""

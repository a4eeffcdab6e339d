"""The compute: what trains and evaluates a policy and writes the ledger's records.

Pretraining the starting policies (``pretrain``) and the weak prefixes (``prefixes``), RL runs
(``runs``), evaluations (``evaluation``, cached in ``store``), the premise's and the probes'
computations (``premise_evaluation``, ``premise_sampling``, ``probing``), the calibrations
(``calibrate``), one task of the plan computed into its record (``jobs.run_task``), the workers
and the Slurm array that run the tasks (``pool``, ``slurm``, ``slurm_settings``, ``sitting``),
the committed starting points (``starting_points``), the proof that a refactor changed no record
(``proof``) and the command line (``cli``, ``cli_checks``, ``cli_config``, ``model_checks``).

May import: the records and plan rooms, the library and the trainer. Never the analysis or the
report: a result is computed here once, into a record, and read there.
"""

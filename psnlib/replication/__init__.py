"""The replication wing: what the notebooks and ``make reproduce`` need on top of the library.

Profiles (the scales, from the 2-core testbed to the papers' GPUs), the policies' pretraining,
weak-prefix training sets, RL runs and the variants an experiment compares, the experiments'
plans, the result store, the compute budget, probes, calibration, the regime gates, the papers'
claims with their statistics and verdicts, the results text, plots, the notebook helpers,
``reproduce`` (``make reproduce``) and the command line (``python -m psnlib train|eval``).

It imports the library (``psnlib``); the library never imports it (an import-linter contract in
``make test``).
"""

"""The analysis: from the ledger's records to the papers' claims, with statistics that decide.

A plan's tables read from the records (``summaries.read``) and derived from them (``summaries``),
the statistics and verdict rules (``claim_stats``, ``verdicts``, ``aggregates``), the claims and
their families (``claim``, ``claims``, ``claims_psn``, ``claims_released``, ``claims_weak``),
the null checks (``nulls``, ``null_records``), GRPO's training-path frontier (``frontier``), the
premise's and the probes' tables (``premise_tables``, ``probe_tables``) and the differences
between the papers and their code (``code_differences``).

May import: the records and plan rooms and the library, never the compute room or the trainer
(an import-linter contract): nothing here trains or evaluates; a missing record is a
``psnlib.replication.records.missing.MissingRecords`` naming it.
"""

"""The records: the run ledger and everything that reads it.

The ledger itself (``ledger``: one JSON record per task under ``results/<profile>/``, written
atomically; what a record must match, ``ledger.Expected``), its schema (``schema``: what a
record holds, checked on every load), the code versions a record states (``codeversion``), where
the ledger and the caches live (``paths``), the error of a missing record (``missing``), and the
readers that turn a plan's records into tables (``tables``) and into the cost of a round
(``cost``) or the state of each task (``status``). Nothing here trains or evaluates a policy.

May import: the plan room and the library. The compute, analysis and report rooms import it.
"""

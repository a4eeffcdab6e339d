"""The replication wing: what the notebooks and ``make reproduce`` need on top of the library.

Five rooms, each a sub-package whose ``__init__`` says what it holds and what it may import; a
room imports only the rooms below it (an import-linter contract in ``make test``):

- ``report``: RESULTS.md, the notebooks' helpers, figures;
- ``analysis`` and ``compute``, side by side and independent: the claims and statistics read from
  the records; the training and evaluation that write them;
- ``records``: the run ledger, its schema and code versions, and its readers;
- ``plan``: the profiles, arms, experiments and tasks, as values.

``reproduce`` (``make reproduce``) drives them: it computes the plan's missing records, then runs
the notebooks. CONTRIBUTING.md says how to add an arm or change run code without losing records.

It imports the library (``psnlib``); the library never imports it.
"""

"""The plan: what the replication runs, as values, and nothing that runs it.

The profiles (``profiles``, ``profile_config``: every size of every experiment), the RL arms
(``arms``), the experiments' plans (``experiments``: which variants at which seeds on which
benchmarks), a compared policy (``variants.Variant``), an RL run's identity (``runs.Run``: its
settings, trainer config, run key and cache path), a starting policy's identity (``policies``),
an evaluation's settings (``evaluation``), the premise's and the probes' plans (``premise``,
``probes``) and the tasks the ledger holds a record for (``tasks``).

May import: the library (``psnlib.*`` outside the wing) and itself. Every other room imports it.
"""

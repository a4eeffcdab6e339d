"""The report: what a reader sees, made from the analysis.

RESULTS.md and the paper-vs-code table (``results``, ``results_page``, ``results_text``,
``results_time``), the regime gates (``regime``), the notebooks' helpers (``notebook``: the
paper's numbers beside ours, the conclusions) and how ``make reproduce`` runs them
(``notebook_runs``), figures (``plots``) and exported policies (``export``).

May import: the analysis, records and plan rooms and the library, never the compute room or the
trainer (an import-linter contract).
"""

"""The experiment harness: the paper's tables, the real-data benchmark and the results page.

Apart from the model library (``cet_model`` never imports it; the runner, tables and figures it
shares with ``flows.train evaluate --runs N`` live in ``flows.lib.experiment``). Modules:

- ``cli``: the command lines (``python -m cet_experiments``), parsed before anything heavy loads;
- ``experiments``: repeated-seed runs of the presets on the synthetic data or any dataset folder;
- ``real`` and ``cohorts``: the real-data benchmark (two protocols) and its published cohorts;
  ``rows``: its rows and the recipe variants of the default CET;
- ``summary``, ``merge``, ``goal``: the generated block of ``docs/results.md``, reports merged
  across seeds, and the occurrence goal read from a report;
- ``analyses``: analyses behind statements in the docs (objective saturation, the original
  code's penalty).
"""

"""The experiment harness: the paper's tables and figures from dataset folders.

Apart from the model library (``cet_model`` never imports it). Modules:

- ``experiments``: repeated-seed runs of the presets and the CLI (``python -m cet_experiments``);
- ``search``: random search over CET-paper's hyper-parameters, tuned on validation AUC;
- ``tables``, ``figures``, ``summary``: the paper's tables and figures, and the generated
  block of ``docs/results.md``;
- ``synthetic``: the paper's synthetic data (Table 3);
- ``analyses``: one-off analyses behind statements in the docs (objective saturation, the
  original code's penalty).
"""

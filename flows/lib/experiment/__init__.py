"""The paper-format experiment: every model fitted once per seed on one dataset, scored on its
test split, and written as ``metrics.json``, ``table.md`` and the paper's figures
(``train-evaluate`` with ``runs`` > 0; ``python -m cet_experiments`` runs the same from the
command line). An optional random search picks CET's settings on the validation split first."""

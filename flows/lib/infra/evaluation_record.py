"""A model version's evaluation, computed once by ``train_version`` and kept as its
``metrics.json``; every reader (the printed summary and tables, the report's figures, the
model card, the promotion rule) reads it back as one typed :class:`Evaluation`.

    >>> record = Evaluation()
    >>> record.test["CET"] = {"death": {"auc": 0.81, "ci": float("nan")}}
    >>> record.summary["CET"] = {"val_auc": 0.8}
    >>> Evaluation.from_json(record.to_json()).test["CET"]["death"]   # NaN kept as null: strict JSON
    {'auc': 0.81, 'ci': None}
    >>> record.events(), Evaluation.from_json({"test": {}}).intervals   # an older record: the part is empty
    (['death'], {})

It lives beside the registry (``flows.lib.infra.registry``), whose promotion rule reads it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

Scores = dict[str, float | None]  # metric -> value, of one model on one event (None: undefined there)
BySplit = dict[str, dict[str, dict[str, Scores]]]  # model -> event -> Scores


@dataclass
class Evaluation:
    """What a version's evaluation holds; each part keyed by model (``CET``, ``ET``, ...).

    - ``val``, ``test``: per event, the metrics of ``cet_model.evaluation.evaluate``
      (``VERSION_METRICS``); ``summary``: per model, the ``val_``/``test_`` averages over the
      events the promotion rule and the tables read;
    - ``seconds``, ``epochs``, ``encoder_epochs``: each fit's cost; ``skipped``: presets left
      out, with why;
    - ``calibration``: per split and model, P(event by the horizon) against Kaplan-Meier;
      ``beyond_follow_up``: per model and event, P(ever) past the training follow-up (test);
      ``observed``: per split, each event's observed count; ``intervals``: the paired bootstrap
      intervals of the test metrics and their differences.
    """

    val: BySplit = field(default_factory=dict)
    test: BySplit = field(default_factory=dict)
    summary: dict[str, dict[str, float | None]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    epochs: dict[str, int] = field(default_factory=dict)
    encoder_epochs: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    calibration: dict = field(default_factory=lambda: {"val": {}, "test": {}})
    beyond_follow_up: dict = field(default_factory=lambda: {"test": {}})
    observed: dict = field(default_factory=dict)
    intervals: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, record: dict) -> Evaluation:
        """From a ``metrics.json`` object; a part an older version did not record is empty, a part
        this code does not know is left out (the file itself is never rewritten)."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in record.items() if k in known and v is not None})

    @classmethod
    def read(cls, version) -> Evaluation:
        """The evaluation of the version folder ``version``."""
        return cls.from_json(json.loads((Path(version) / "metrics.json").read_text()))

    def to_json(self) -> dict:
        """The ``metrics.json`` object: NaN (a metric undefined on a split) becomes null."""
        return _clean(dataclasses.asdict(self))

    def events(self) -> list[str]:
        """The events, in the dataset's order (the order ``by_event`` intervals follow)."""
        return list(dict.fromkeys(e for rows in self.test.values() for e in rows))


def _clean(o):
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_clean(v) for v in o]
    if isinstance(o, float | np.floating):
        return None if np.isnan(o) else float(o)
    return o

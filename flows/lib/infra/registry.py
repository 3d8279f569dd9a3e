"""A model registry on disk: ``models/<dataset>/<version>/``.

Each version folder holds one sub-folder per trained model (safetensors + config.json),
``metrics.json`` (validation and test metrics per model), ``params.json`` (training
parameters), ``data.json`` (the dataset's fingerprint, manifest name, feature and event
names, featurization, the longest training follow-up per event), ``train_ids.npy`` (keyed hashes
of the training rows' ids, when a key was given) and, once judged, ``decision.json`` (promoted or
kept, and why). The promoted
version is named in ``models/<dataset>/promoted.json``; every decision is appended to
``models/<dataset>/history.jsonl``. Versions are ``v0001``, ``v0002``, ... and are
written under a temporary name, then renamed, so a crash leaves no half version.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from cet_model.atomic import remove_dead_leftovers, write_text
from cet_model.summary import difference_text

# metric -> +1 when higher is better, -1 when lower is better
from flows.lib.choices import METRIC_DIRECTION  # noqa: E402
from flows.lib.infra.crash import crash_point
from flows.lib.infra.evaluation_record import Evaluation

VERSION = re.compile(r"^v(\d{4,})$")
# what decides between two point values: the values themselves, or the paired interval of their difference
from flows.lib.choices import EVIDENCE  # noqa: E402


@dataclass(frozen=True)
class Rule:
    """Promote when the candidate's ``metric`` is not worse than the promoted version's by
    more than ``tolerance`` (``always``: promote every new version). ``evidence``: ``point``
    compares the two values; where the comparison has a paired bootstrap interval of candidate
    minus promoted (AUC and C: ``promotion.promoted_on_candidate_rows``), ``not-worse``
    promotes unless the interval lies wholly below ``-tolerance`` (the data show the candidate
    worse) and ``better`` only when it lies wholly above ``tolerance`` (they show it better);
    without an interval those two fall back to the point values, saying so."""

    metric: str = "val_auc"
    tolerance: float = 0.0
    evidence: str = "point"

    def __post_init__(self):
        if self.metric not in METRIC_DIRECTION:
            raise ValueError(f"promotion metric {self.metric!r} is not one of {sorted(METRIC_DIRECTION)}")
        if self.tolerance < 0:
            raise ValueError(f"promotion tolerance must be >= 0, got {self.tolerance}")
        if self.evidence not in EVIDENCE:
            raise ValueError(f"promotion evidence {self.evidence!r} is not one of {list(EVIDENCE)}")


def _write_json(path: Path, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str))


def versions(root: Path, dataset: str) -> list[str]:
    d = Path(root) / dataset
    if not d.is_dir():
        return []
    return sorted((p.name for p in d.iterdir() if p.is_dir() and VERSION.match(p.name)),
                  key=lambda n: int(VERSION.match(n).group(1)))


def staging_dir(root: Path, dataset: str) -> Path:
    """A fresh temporary folder to fill; hand it to ``commit``."""
    d = Path(root) / dataset
    d.mkdir(parents=True, exist_ok=True)
    remove_dead_leftovers(d, ".incoming-*")
    return Path(tempfile.mkdtemp(dir=d, prefix=f".incoming-{os.getpid()}-"))


def commit(root: Path, dataset: str, tmp: Path) -> Path:
    """Give a filled staging folder the next version name (atomic rename)."""
    for _ in range(100):
        existing = versions(root, dataset)
        n = int(VERSION.match(existing[-1]).group(1)) + 1 if existing else 1
        dest = Path(root) / dataset / f"v{n:04d}"
        try:
            os.rename(tmp, dest)  # fails if dest appeared meanwhile (another run)
            return dest
        except OSError:
            if not dest.exists():
                raise
    raise RuntimeError(f"{Path(root) / dataset}: could not name a new version")


def find_version(root: Path, dataset: str, key: str) -> Path | None:
    """An existing version trained from the same data, parameters and code (its stage key)."""
    for v in reversed(versions(root, dataset)):
        p = Path(root) / dataset / v / "params.json"
        if p.is_file() and json.loads(p.read_text()).get("stage_key") == key:
            return p.parent
    return None


def promoted(root: Path, dataset: str) -> Path | None:
    p = Path(root) / dataset / "promoted.json"
    if not p.is_file():
        return None
    try:
        version = json.loads(p.read_text())["version"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"{p}: not a promotion record ({type(exc).__name__}: {exc}); "
                         "remove it and promote a version again") from None
    return Path(root) / dataset / version


def resolve_version(models_root, dataset: str, version: str | None = None) -> Path:
    """The folder of ``dataset``'s version ``version``, or of its promoted version; FileNotFoundError
    says what is missing."""
    if version:
        path = Path(models_root) / dataset / version
        if not (path / "data.json").is_file():
            raise FileNotFoundError(f"{path}: not a registered model version")
        return path
    path = promoted(models_root, dataset)
    if path is None:
        raise FileNotFoundError(f"{Path(models_root) / dataset}: no promoted model; run train-evaluate or "
                                f"retrain for {dataset!r} first")
    return path


def metric_value(version_dir: Path, metric: str, model: str = "CET") -> float:
    """A version's recorded summary value; NaN when it is undefined there (e.g. a concordance on
    validation rows without an observed event) or was not recorded (a version from before it was)."""
    value = Evaluation.read(version_dir).summary[model].get(metric)
    return float("nan") if value is None else float(value)


def metric_recorded(version_dir: Path, metric: str, model: str = "CET") -> bool:
    """Whether the version recorded ``metric`` at all (its value may still be undefined)."""
    return metric in Evaluation.read(version_dir).summary[model]


UNDEFINED_WHY = {m: "a concordance needs the event observed in some validation rows" for m in ("val_ci", "val_ci_rmst")}


def decide(root: Path, dataset: str, candidate: Path, rule: Rule, model: str = "CET", note: str | None = None,
           rescored: dict | None = None) -> dict:
    """Apply the rule to ``candidate``; promote it or keep the current version; record why
    (``note``: how the rule was chosen, when that needs saying). ``rescored``: the promoted
    version and the candidate on the same validation rows (``promotion.promoted_on_candidate_rows``):
    its ``value`` and ``candidate_value`` (set when the two were trained on different data), when
    not None, replace the recorded values (kept as
    ``previous_recorded_value`` and ``candidate_recorded_value``), its ``difference`` (candidate
    minus promoted, with a paired bootstrap interval) is kept, and its ``note`` as ``comparison``."""
    recorded = _recorded_decision(root, dataset, candidate)
    if recorded is not None and recorded.get("promoted") and not _is_promoted(root, dataset, candidate):
        # promoted and recorded, then killed before promoted.json: finish the promotion from the audit line
        _write_json(Path(root) / dataset / "promoted.json", {"version": candidate.name, "since": recorded["time"]})
        return recorded
    current = promoted(root, dataset)
    decision = {"candidate": candidate.name, "metric": rule.metric, "tolerance": rule.tolerance,
                **({"evidence": rule.evidence} if rule.evidence != "point" else {}),
                **({"note": note} if note else {}),
                **({"comparison": rescored["note"]} if rescored else {}),
                **({"difference": rescored["difference"]} if rescored and rescored.get("difference") else {}),
                "model": model, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if current is not None and current.resolve() == Path(candidate).resolve():  # promoted by hand, or no audit line
        decision |= {"promoted": True, "previous": current.name, "reason": "already the promoted version"}
        if not _in_history(root, dataset, candidate.name):
            _append_history(root, dataset, decision | {"reconciled": True, "reason": "already the promoted version; "
                                                       "the history had no line for it (added on a rerun)"})
        return decision
    if current is None:
        decision |= {"promoted": True, "previous": None, "reason": "the first version: nothing was promoted before"}
    elif rule.metric == "always":
        decision |= {"promoted": True, "previous": current.name, "reason": "rule 'always' promotes every version"}
    else:
        new, old = metric_value(candidate, rule.metric, model), metric_value(current, rule.metric, model)
        same_rows = rescored is not None and rescored.get("value") is not None
        if same_rows:
            decision |= {"previous_recorded_value": old, "candidate_recorded_value": new}
            new, old = float(rescored["candidate_value"]), float(rescored["value"])
        sign = METRIC_DIRECTION[rule.metric]
        if math.isnan(new):  # an undefined candidate never wins: not worse, but nothing to judge it by
            ok, verdict = False, (f"undefined for the candidate ({UNDEFINED_WHY.get(rule.metric, 'no value')}), so the "
                                  f"rule cannot judge it: kept {current.name} (promote by hand if it should replace "
                                  "it)")
        elif math.isnan(old):  # an undefined incumbent always loses
            ok, verdict = True, f"undefined for {current.name}, promoted"
        else:
            ok = sign * (new - old) >= -rule.tolerance
            verdict = "not worse, promoted" if ok else f"worse, kept {current.name}"
        word = "higher" if sign > 0 else "lower"
        terms = f"{word} is better, tolerance {rule.tolerance}"
        d = (rescored or {}).get("difference")
        if rule.evidence != "point":
            terms += f", evidence {rule.evidence}"
            if d is None or math.isnan(new) or math.isnan(old):
                terms += ": no interval of the difference, so the point values decide"
            else:  # d: candidate minus promoted, higher is better (AUC, C)
                ok = d["high"] >= -rule.tolerance if rule.evidence == "not-worse" else d["low"] > rule.tolerance
                shown = {("not-worse", True): "not shown worse", ("not-worse", False): "shown worse",
                         ("better", True): "shown better", ("better", False): "not shown better"}
                verdict = (f"{shown[rule.evidence, bool(ok)]} (candidate minus {current.name} {difference_text(d)}), "
                           + ("promoted" if ok else f"kept {current.name}"))
        decision |= {"promoted": bool(ok), "previous": current.name, "candidate_value": new, "previous_value": old,
                     "reason": (f"{rule.metric} {new:.4f} vs {old:.4f} for {current.name}"
                                + (_rows_text(candidate.name, rescored) if same_rows else "") + f" ({terms}): "
                                + verdict)}
    # the audit line before the promotion it records: a kill between the two leaves the line, and the
    # rerun finishes the promotion from it (above) instead of promoting unrecorded
    _write_json(candidate / "decision.json", decision)
    _append_history(root, dataset, decision)
    crash_point("promote")
    if decision["promoted"]:
        _write_json(Path(root) / dataset / "promoted.json", {"version": candidate.name, "since": decision["time"]})
    return decision


def _append_history(root: Path, dataset: str, record: dict) -> None:
    """One line on ``history.jsonl``, flushed to the disk before anything that depends on it."""
    with open(Path(root) / dataset / "history.jsonl", "a") as fh:
        fh.write(json.dumps(record, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _history(root: Path, dataset: str) -> list[dict]:
    path = Path(root) / dataset / "history.jsonl"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # a line a killed writer left half: not a decision
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def _in_history(root: Path, dataset: str, version: str) -> bool:
    return any(r.get("candidate") == version for r in _history(root, dataset))


def _is_promoted(root: Path, dataset: str, candidate: Path) -> bool:
    current = promoted(root, dataset)
    return current is not None and current.name == candidate.name


def _recorded_decision(root: Path, dataset: str, candidate: Path) -> dict | None:
    """The rule's decision on ``candidate`` when its ``decision.json`` and the history's last line
    are the same record (written by one run), else None."""
    try:
        decision = json.loads((Path(candidate) / "decision.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    rows = _history(root, dataset)  # its line must be the last: nothing (a promotion by hand) came after it
    last = rows[-1] if rows else {}
    same = last.get("candidate") == candidate.name and not last.get("by_hand") and all(
        last.get(k) == decision.get(k) for k in ("time", "promoted", "reason"))
    return decision if same else None


def promote_by_hand(root: Path, dataset: str, version: str, reason: str) -> dict:
    """Make ``version`` the promoted one by a person's decision: a rollback after the rule promoted
    a version that misbehaves in use, or a version the rule kept out. ``reason`` is required and
    kept in ``history.jsonl`` with the version it replaced; the version's own ``decision.json``
    (what the rule decided when it was trained) is left as it was. Returns the record. A version
    that does not exist or has no CET model (what predict scores with) is a ValueError naming it.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> promote_by_hand(root, "mimic", "v0001", "rollback")
    Traceback (most recent call last):
    ValueError: ... no version 'v0001' of mimic (versions: none)
    """
    if not reason or not reason.strip():
        raise ValueError("a reason is required: it is kept in history.jsonl beside the promotion")
    known = versions(root, dataset)
    folder = Path(root) / dataset / version
    if version not in known:
        raise ValueError(f"{Path(root) / dataset}: no version {version!r} of {dataset} (versions: "
                         f"{', '.join(known) or 'none'})")
    if not (folder / "CET" / "config.json").is_file():
        raise ValueError(f"{folder}: no CET model (config.json), which predict scores with: it cannot be promoted")
    current = promoted(root, dataset)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    record = {"candidate": version, "promoted": True, "by_hand": True, "previous": current.name if current else None,
              "time": now, "reason": f"promoted by hand: {reason.strip()}"}
    if current is not None and current.name == version:
        return record | {"reason": f"{version} is already the promoted version: nothing changed"}
    _append_history(root, dataset, record)  # the audit line first, as in decide
    crash_point("promote")
    _write_json(Path(root) / dataset / "promoted.json", {"version": version, "since": now, "by_hand": True})
    return record


def version_rows(root: Path, dataset: str) -> list[dict]:
    """One row per version, oldest first: whether it is the promoted one (``by_hand``: by
    ``promote_by_hand``, not by the rule), when it was judged,
    its data's fingerprint (12 characters), CET's validation AUC and C (RMST) (None where not
    recorded or undefined), and the rule's decision when it was trained."""
    current = promoted(root, dataset)
    by_hand = current is not None and bool(json.loads((Path(root) / dataset / "promoted.json").read_text())
                                           .get("by_hand"))
    rows = []
    for v in versions(root, dataset):
        folder = Path(root) / dataset / v

        def read(name, folder=folder):
            path = folder / name
            try:
                return json.loads(path.read_text()) if path.is_file() else {}
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise ValueError(f"{path}: not JSON ({exc}); the version's record is damaged") from None
        summary = Evaluation.from_json(read("metrics.json")).summary.get("CET") or {}
        decision = read("decision.json")
        values = {k: summary.get(k) for k in ("val_auc", "val_ci_rmst")}
        is_promoted = current is not None and current.name == v
        rows.append({"version": v, "promoted": is_promoted, "by_hand": is_promoted and by_hand,
                     "judged": decision.get("time"), "data": (read("data.json").get("fingerprint") or "")[:12] or None,
                     **{k: None if x is None or math.isnan(x) else round(float(x), 4) for k, x in values.items()},
                     "decision": decision.get("reason")})
    return rows


def _rows_text(candidate: str, rescored: dict) -> str:
    rows, of = rescored.get("rows"), rescored.get("of")
    if rows is None or rows == of:
        return f" on {candidate}'s validation rows"
    return f" on {rows} of {candidate}'s {of} validation rows"


def discard(tmp: Path) -> None:
    shutil.rmtree(tmp, ignore_errors=True)

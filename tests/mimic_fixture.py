"""A tiny hand-made MIMIC-III folder (demo layout: lower-case headers, plain CSV)."""

from __future__ import annotations

import csv
from pathlib import Path

from flows.lib.mimic.schema import TABLES

T0 = "2100-01-01 00:00:00"


def at(hours: float) -> str:
    h, m = int(hours), int(round((hours - int(hours)) * 60))
    day, h = 1 + h // 24, h % 24
    return f"2100-01-{day:02d} {h:02d}:{m:02d}:00"


def _row(table, **values):
    return [values.get(c.lower(), "") for c, _ in TABLES[table]]


def write_fixture(root: Path, n_admissions: int = 5) -> Path:
    """Admission 101 is the one the tests compute by hand; 102 has a lab before ADMITTIME;
    the others repeat 101's pattern so every item is common in any training split."""
    rows = {t: [] for t in TABLES}
    for k in range(n_admissions):
        hadm, subj = 101 + k, 1 + k
        rows["PATIENTS"].append(
            _row("PATIENTS", row_id=k, subject_id=subj, gender="F", dob="2050-01-01 00:00:00", expire_flag=0)
        )
        rows["ADMISSIONS"].append(
            _row(
                "ADMISSIONS",
                row_id=k,
                subject_id=subj,
                hadm_id=hadm,
                admittime=T0,
                dischtime=at(48),
                admission_type="EMERGENCY",
                admission_location="x",
                discharge_location="y",
                insurance="z",
                ethnicity="w",
                has_chartevents_data=1,
            )
        )
        rows["ICUSTAYS"].append(
            _row(
                "ICUSTAYS",
                row_id=k,
                subject_id=subj,
                hadm_id=hadm,
                icustay_id=200 + k,
                dbsource="carevue",
                first_careunit="MICU",
                last_careunit="MICU",
                first_wardid=1,
                last_wardid=1,
                intime=T0,
                outtime=at(40),
                los=1.6,
            )
        )
        ce = [
            (1, 1, "10", 10, ""),
            (1, 2, "20", 20, ""),
            (1, 30, "30", 30, ""),  # 30 h: outside the window
            (1, 5, "999", 999, 1),  # ERROR = 1 (MetaVision): dropped
            (1, 6, "40", 40, 0),  # ERROR = 0: kept
            (2, 3, "abc", "", ""),
            (2, 4, "def", "", ""),
        ]  # a text item: counted, never averaged
        for i, (item, h, v, vn, err) in enumerate(ce):
            rows["CHARTEVENTS"].append(
                _row(
                    "CHARTEVENTS",
                    row_id=100 * k + i,
                    subject_id=subj,
                    hadm_id=hadm,
                    itemid=item,
                    charttime=at(h),
                    value=v,
                    valuenum=vn,
                    error=err,
                )
            )
        labs = [(50912, 0.5, 1.0), (50912, 6, 3.0), (50800, 1, ""), (51003, 10, "")]  # creatinine, specimen, troponin
        if k == 1:
            labs.append((50912, -2, 5.0))  # before ADMITTIME: it becomes the origin of 102
        for i, (item, h, vn) in enumerate(labs):
            ts = at(h) if h >= 0 else "2099-12-31 22:00:00"
            rows["LABEVENTS"].append(
                _row(
                    "LABEVENTS",
                    row_id=100 * k + i,
                    subject_id=subj,
                    hadm_id=hadm,
                    itemid=item,
                    charttime=ts,
                    value="v",
                    valuenum=vn,
                )
            )
        for i, (h, v) in enumerate([(2, 100), (3, 50), (25, 70)]):
            rows["OUTPUTEVENTS"].append(
                _row(
                    "OUTPUTEVENTS",
                    row_id=100 * k + i,
                    subject_id=subj,
                    hadm_id=hadm,
                    itemid=40055,
                    charttime=at(h),
                    value=v,
                )
            )
    rows["D_ITEMS"] = [
        _row("D_ITEMS", row_id=i, itemid=it, label=lb)
        for i, (it, lb) in enumerate([(1, "Heart Rate"), (2, "Heart Rhythm"), (40055, "Urine Out Foley")])
    ]
    rows["D_LABITEMS"] = [
        _row("D_LABITEMS", row_id=i, itemid=it, label=lb, fluid="Blood", category="Chemistry")
        for i, (it, lb) in enumerate([(50912, "Creatinine"), (50800, "SPECIMEN TYPE"), (51003, "Troponin T")])
    ]
    root.mkdir(parents=True, exist_ok=True)
    for table, body in rows.items():
        with open(root / f"{table}.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow([c.lower() for c, _ in TABLES[table]])
            w.writerows(body)
    return root

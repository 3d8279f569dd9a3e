"""The item catalogue the MIMIC stand-in draws from: ITEMIDs, labels and row frequencies.

``flows/data/mimic_item_frequencies.csv`` holds the real MIMIC-III v1.3 item counts (item
metadata and counts only, no patient data). Rows of each table are drawn in proportion to
those counts, so the stand-in's top items are the real top items: CareVue-heavy text items
(Heart Rhythm, Code Status, ...) next to numeric vital signs, both CareVue and MetaVision ids.

Whether an item is numeric is not in the file. MetaVision items carry PARAM_TYPE; CareVue
items and labs are classified by label (``NUMERIC_CHART`` / ``TEXT_LAB``). Value ranges of
well-known items are set by hand; the rest get a range derived from the ITEMID (stable
across runs and scales).
"""

from __future__ import annotations

import csv
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CATALOGUE = Path(__file__).resolve().parents[2] / "data" / "mimic_item_frequencies.csv"

NUMERIC_CHART = re.compile(
    r"(?i)(rate|spo2|sao2|\bbp\b|alarm|weight|\bcvp\b|temperature|temp [fc]\b|gcs total|fio2|\bpap\b"
    r"|pressure|height|glucose|peep|volume|tidal|hemoglobin|hematocrit|potassium|sodium|creatinine"
    r"|\bbun\b|chloride|magnesium|calcium|phosph|platelet|\bwbc\b|\binr\b|\bptt?\b|\bph\b|pco2|po2"
    r"|lactate|cardiac output|svo2|minute|mean|systolic|diastolic|\[low\]|\[high\])")
TEXT_LAB = re.compile(
    r"(?i)(specimen|color|appearance|bacteria|yeast|casts|crystals|comment|intubated|ventilator"
    r"|nitrite|leukocytes|ketone|hold|type|morphology|anisocytosis|poikilocytosis|macrocytes"
    r"|microcytes|hypochromia|polychromasia|ovalocytes|schistocytes|teardrop|target|burr|spherocytes"
    r"|elliptocytes|platelet smear|\bmucous\b|amorphous|sperm|trichomonas|urine mucous|positive|qual)")

# (base, sd, decimals, unit) of well-known items; everything else gets _derived_range().
KNOWN_RANGES: dict[int, tuple[float, float, int, str | None]] = {
    211: (86, 16, 0, "BPM"), 220045: (86, 16, 0, "bpm"),
    646: (97, 2, 0, "%"), 220277: (97, 2, 0, "%"),
    618: (19, 5, 0, "BPM"), 220210: (19, 5, 0, "insp/min"),
    51: (120, 20, 0, "mmHg"), 220050: (120, 20, 0, "mmHg"),
    8368: (60, 12, 0, "mmHg"), 220051: (60, 12, 0, "mmHg"),
    52: (80, 14, 0, "mmHg"), 220052: (80, 14, 0, "mmHg"),
    455: (122, 22, 0, "mmHg"), 220179: (122, 22, 0, "mmHg"),
    8441: (62, 13, 0, "mmHg"), 220180: (62, 13, 0, "mmHg"),
    456: (80, 14, 0, "mmHg"), 220181: (80, 14, 0, "mmHg"),
    678: (98.6, 1.2, 1, "Deg. F"), 223761: (98.6, 1.2, 1, "?F"), 677: (37.0, 0.7, 1, "Deg. C"),
    113: (11, 4, 0, "mmHg"), 220074: (11, 4, 0, "mmHg"), 198: (12, 3, 0, "points"),
    51221: (31, 5, 1, "%"), 50971: (4.1, 0.6, 1, "mEq/L"), 50983: (138, 4, 0, "mEq/L"),
    50912: (1.3, 0.8, 1, "mg/dL"), 50902: (104, 5, 0, "mEq/L"), 51006: (26, 14, 0, "mg/dL"),
    50882: (25, 4, 0, "mEq/L"), 51265: (220, 90, 0, "K/uL"), 50868: (14, 3, 0, "mEq/L"),
    51301: (10.5, 4, 1, "K/uL"), 51222: (10.5, 1.8, 1, "g/dL"), 50931: (130, 40, 0, "mg/dL"),
    40055: (120, 80, 0, "ml"), 226559: (120, 80, 0, "mL"),
}

# Pick-lists of text items. Some values carry a comma or a double quote, as the real ones
# do ("Arm, Right Lower"), so the writer's quoting is exercised.
PICK_LISTS: dict[int, list[str]] = {
    212: ["SR (Sinus Rhythm)", "ST (Sinus Tachycardia)", "AF (Atrial Fibrillation)", "SB (Sinus Bradycardia)"],
    161: ["None", "PVC's", "PAC's", "Multifocal PVC's"],
    128: ["Full Code", "DNR (do not resuscitate)", "Comfort Measures", "DNR / DNI"],
    550: ["Standard", "Contact", "Droplet", "Airborne"],
    1125: ["MICU", "SICU", "CCU", "CSRU"],
    742: ["[x] Yes"],
    159: ["Rare", "Occasional", "Frequent", "Runs Vtach"],
    1484: ["No Risk Factors", "High risk (>51)", "Low risk (25-50)"],
    220739: ["4 Spontaneously", "3 To speech", "2 To pain", "1 No Response"],
}
GENERIC_TEXT = ["Yes", "No", "Normal", "Abnormal", "Not applicable", "Other/Remarks", "Arm, Right Lower",
                'Pt states "comfortable"', "Clear", "Diminished", "WNL", "See Flowsheet"]
NUMERIC_AS_TEXT = ["Unable to assess", "Not done", "ERROR"]  # text in a numeric item: VALUENUM null


@dataclass(frozen=True)
class ItemTable:
    """One table's items: id, label, draw weight (sums to 1), dbsource, numeric flag, range."""

    itemid: np.ndarray
    label: list[str]
    weight: np.ndarray
    dbsource: np.ndarray
    numeric: np.ndarray
    base: np.ndarray
    sd: np.ndarray
    decimals: np.ndarray
    unit: list[str | None]
    meta: list[dict]

    def subset(self, mask: np.ndarray) -> ItemTable:
        idx = np.flatnonzero(mask)
        w = self.weight[idx]
        return ItemTable(self.itemid[idx], [self.label[i] for i in idx], w / w.sum(), self.dbsource[idx],
                         self.numeric[idx], self.base[idx], self.sd[idx], self.decimals[idx],
                         [self.unit[i] for i in idx], [self.meta[i] for i in idx])


def _derived_range(itemid: int) -> tuple[float, float, int]:
    """A stable pseudo-random range for an item without a known one."""
    h = zlib.crc32(str(itemid).encode()) / 2**32
    base = float(np.exp(np.log(1.0) + h * np.log(300.0)))
    decimals = 0 if base > 30 else (1 if base > 2 else 2)
    return round(base, decimals) or 1.0, base * (0.08 + 0.2 * ((h * 7919) % 1)), decimals


def _is_numeric(table: str, row: dict) -> bool:
    if table == "outputevents":
        return True
    if table == "labevents":
        return not TEXT_LAB.search(row["label"])
    if row["dbsource"] == "metavision":
        return row["param_type"].startswith("Numeric")
    return bool(NUMERIC_CHART.search(row["label"]))


def load_items(table: str, path: Path = CATALOGUE) -> ItemTable:
    """The catalogue rows of ``table`` ('chartevents', 'labevents' or 'outputevents')."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["table"] == table]
    if not rows:
        raise ValueError(f"{path}: no items for table {table!r}")
    ids = np.array([int(r["itemid"]) for r in rows], dtype=np.int64)
    counts = np.array([float(r["count_v13"]) for r in rows])
    numeric = np.array([_is_numeric(table, r) for r in rows])
    base, sd, dec, unit = [], [], [], []
    for r, i in zip(rows, ids, strict=True):
        if int(i) in KNOWN_RANGES:
            b, s, d, u = KNOWN_RANGES[int(i)]
        else:
            (b, s, d), u = _derived_range(int(i)), (r["unitname"] or None)
        base.append(b)
        sd.append(s)
        dec.append(d)
        unit.append(u)
    dbs = np.array([r["dbsource"] or "hospital" for r in rows])
    return ItemTable(ids, [r["label"] for r in rows], counts / counts.sum(), dbs, numeric,
                     np.array(base), np.array(sd), np.array(dec, dtype=np.int64), unit, rows)


def pick_list(itemid: int, label: str) -> list[str]:
    """The text values an item takes (a stable choice among the generic ones if not known)."""
    if itemid in PICK_LISTS:
        return PICK_LISTS[itemid]
    h = zlib.crc32(f"{itemid}:{label}".encode())
    k = 2 + h % 4
    start = (h >> 8) % len(GENERIC_TEXT)
    return [GENERIC_TEXT[(start + j) % len(GENERIC_TEXT)] for j in range(k)]

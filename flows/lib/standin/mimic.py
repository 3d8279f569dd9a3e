"""A MIMIC-III v1.4 stand-in in the full release's exact file layout, at any scale, with planted truth.

    generate(out_dir, scale=0.1)  # 1/10 of the full release: ~5,900 admissions, ~33M chart rows

Writes the eight tables the build reads as ``NAME.csv.gz`` (dialect in ``gz_csv``) with the
real column order and types, the full release's row counts times ``scale``, real ITEMIDs in
their real proportions (``mimic_standin_items``), a CareVue/MetaVision mix (CareVue stays
have NULL ERROR/WARNING, MetaVision ones 0/1 with rare ERROR = 1 rows holding implausible
values), text VALUEs, outpatient labs without HADM_ID and event labs after discharge that
must not count. Next to them: ``SHA256SUMS.txt`` (as the release has), ``standin.json``
(parameters, planted structure, row counts, oracle AUCs) and ``standin_truth.parquet``
(per admission: latent factors, true occurrence probability, planted occurrence and hours
from the origin to the first collection).

The folder is written under a temporary name and renamed when complete.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import polars as pl
from tqdm.auto import tqdm

from cet_model.metrics import occurrence_auc
from flows.lib.infra import interrupts
from flows.lib.infra.folders import publish, refuse_non_empty, temporary_sibling
from flows.lib.mimic.build import EVENTS
from flows.lib.mimic.schema import TABLES
from flows.lib.standin.gz_csv import GzCsvWriter
from flows.lib.standin.mimic_cohort import (
    ADMISSION_TYPES,
    DBSOURCES,
    EVENT_PLAN,
    FACTOR_CHART,
    FACTOR_LABS,
    N_FACTORS,
    Cohort,
    make_cohort,
    plant_structure,
)
from flows.lib.standin.mimic_items import load_items
from flows.lib.standin.mimic_rows import (
    Sampler,
    Vocab,
    chart_chunk,
    factor_lookup,
    frame,
    lab_chunk,
    null_where,
    output_chunk,
    timestamps,
)

log = logging.getLogger("flows.mimic.standin")
GENERATOR_VERSION = 2  # 2: the occurrence of a driver event shifts an event's timing
FULL_RELEASE = {"PATIENTS": 46_520, "ADMISSIONS": 58_976, "ICUSTAYS": 61_532, "CHARTEVENTS": 330_712_483,
                "LABEVENTS": 27_854_055, "OUTPUTEVENTS": 4_349_218, "D_ITEMS": 12_487, "D_LABITEMS": 753}
OUTPATIENT_LAB_SHARE = 0.19
CHUNK_CHART_ROWS = 1_500_000
LOINC = {51363: "26465-5", 51003: "6598-7", 51458: "26467-1", 50993: "3016-3", 51196: "48065-7",
         51514: "5818-0", 50873: "5047-6", 50866: "16362-6", 50956: "3040-3"}


DIAGNOSES = ["SEPSIS", "PNEUMONIA", "CONGESTIVE HEART FAILURE", "PULMONARY EDEMA, MI", "S/P FALL",
             "CHEST PAIN\\CATH", " GI BLEED", "CORONARY ARTERY DISEASE\\CORONARY ARTERY BYPASS GRAFT /SDA",
             "ALTERED MENTAL STATUS", 'ABDOMINAL PAIN "ACUTE"']


def admissionsframe(c: Cohort, rng) -> pl.DataFrame:
    a = c.n_admissions
    emergency = ADMISSION_TYPES[c.adm_type] == "EMERGENCY"
    ed_reg = c.admit - rng.integers(1800, 6 * 3600, a) // 60 * 60
    return frame(
        "ADMISSIONS",
        {
            "ROW_ID": np.arange(1, a + 1),
            "SUBJECT_ID": c.subject_ids[c.adm_subject],
            "HADM_ID": c.hadm_id,
            "ADMITTIME": timestamps(c.admit),
            "DISCHTIME": timestamps(c.disch),
            "DEATHTIME": null_where(timestamps(c.disch), ~c.died),
            "ADMISSION_TYPE": ADMISSION_TYPES[c.adm_type],
            "ADMISSION_LOCATION": rng.choice(
                [
                    "EMERGENCY ROOM ADMIT",
                    "PHYS REFERRAL/NORMAL DELI",
                    "CLINIC REFERRAL/PREMATURE",
                    "TRANSFER FROM HOSP/EXTRAM",
                ],
                a,
            ),
            "DISCHARGE_LOCATION": np.where(
                c.died, "DEAD/EXPIRED", rng.choice(["HOME", "HOME HEALTH CARE", "SNF", "REHAB/DISTINCT PART HOSP"], a)
            ),
            "INSURANCE": rng.choice(["Medicare", "Private", "Medicaid", "Government", "Self Pay"], a),
            "LANGUAGE": null_where(rng.choice(["ENGL", "SPAN", "PORT", "RUSS"], a), rng.random(a) < 0.3),
            "RELIGION": null_where(
                rng.choice(["CATHOLIC", "NOT SPECIFIED", "PROTESTANT QUAKER", "JEWISH"], a), rng.random(a) < 0.01
            ),
            "MARITAL_STATUS": null_where(
                rng.choice(["MARRIED", "SINGLE", "WIDOWED", "DIVORCED"], a), rng.random(a) < 0.2
            ),
            "ETHNICITY": rng.choice(
                ["WHITE", "BLACK/AFRICAN AMERICAN", "HISPANIC OR LATINO", "UNKNOWN/NOT SPECIFIED", "ASIAN"], a
            ),
            "EDREGTIME": null_where(timestamps(ed_reg), ~emergency),
            "EDOUTTIME": null_where(timestamps(c.admit), ~emergency),
            "DIAGNOSIS": np.where(ADMISSION_TYPES[c.adm_type] == "NEWBORN", "NEWBORN", rng.choice(DIAGNOSES, a)),
            "HOSPITAL_EXPIRE_FLAG": c.died.astype(np.int64),
            "HAS_CHARTEVENTS_DATA": np.bincount(c.stay_adm, minlength=a).clip(0, 1),
        },
    )


def patientsframe(c: Cohort, rng) -> pl.DataFrame:
    n = c.subject_ids.size
    first_admit = np.full(n, np.iinfo(np.int64).max)
    np.minimum.at(first_admit, c.adm_subject, c.admit)
    newborn = np.zeros(n, bool)
    newborn[c.adm_subject[ADMISSION_TYPES[c.adm_type] == "NEWBORN"]] = True
    age_days = np.where(newborn, 0, np.clip(rng.normal(63, 16, n), 18, 89) * 365.25).astype(np.int64)
    dob = (first_admit - age_days * 86400) // 86400 * 86400
    dob = np.where(~newborn & (rng.random(n) < 0.06), (first_admit - 300 * 365 * 86400) // 86400 * 86400, dob)
    died_hosp = np.zeros(n, bool)
    died_hosp[c.adm_subject[c.died]] = True
    last_disch = np.zeros(n, np.int64)
    np.maximum.at(last_disch, c.adm_subject, c.disch)
    died_later = ~died_hosp & (rng.random(n) < 0.2)
    dod = np.where(died_hosp, last_disch, last_disch + rng.integers(1, 1500, n) * 86400) // 86400 * 86400
    dead = died_hosp | died_later
    return frame(
        "PATIENTS",
        {
            "ROW_ID": np.arange(1, n + 1),
            "SUBJECT_ID": c.subject_ids,
            "GENDER": rng.choice(["M", "F"], n, p=[0.56, 0.44]),
            "DOB": timestamps(dob),
            "DOD": null_where(timestamps(dod), ~dead),
            "DOD_HOSP": null_where(timestamps(dod), ~died_hosp),
            "DOD_SSN": null_where(timestamps(dod), ~(dead & (rng.random(n) < 0.8))),
            "EXPIRE_FLAG": dead.astype(np.int64),
        },
    )


def icustaysframe(c: Cohort, rng) -> pl.DataFrame:
    s = c.stay_adm.size
    newborn = ADMISSION_TYPES[c.adm_type[c.stay_adm]] == "NEWBORN"
    unit = np.where(newborn, "NICU", rng.choice(["MICU", "SICU", "CCU", "CSRU", "TSICU"], s))
    ward = rng.integers(1, 60, s)
    los = np.round((c.outtime - c.intime) / 86400, 4)
    missing = rng.random(s) < 1e-4  # a few stays lack OUTTIME and LOS
    return frame(
        "ICUSTAYS",
        {
            "ROW_ID": np.arange(1, s + 1),
            "SUBJECT_ID": c.subject_ids[c.adm_subject[c.stay_adm]],
            "HADM_ID": c.hadm_id[c.stay_adm],
            "ICUSTAY_ID": c.icustay_id,
            "DBSOURCE": DBSOURCES[c.db[c.stay_adm]],
            "FIRST_CAREUNIT": unit,
            "LAST_CAREUNIT": unit,
            "FIRST_WARDID": ward,
            "LAST_WARDID": ward,
            "INTIME": timestamps(c.intime),
            "OUTTIME": null_where(timestamps(c.outtime), missing),
            "LOS": null_where(los, missing),
        },
    )


def d_itemsframe(chart, output) -> pl.DataFrame:
    rows = [(int(i), lab, m, "chartevents") for i, lab, m in zip(chart.itemid, chart.label, chart.meta, strict=True)]
    rows += [
        (int(i), lab, m, "outputevents") for i, lab, m in zip(output.itemid, output.label, output.meta, strict=True)
    ]
    used = {r[0] for r in rows}
    filler = (i for i in range(1, 10_000_000) if i not in used and (i < 30_000 or i > 40_000))
    while len(rows) < FULL_RELEASE["D_ITEMS"]:  # the release's dictionary also lists items no table here uses
        rows.append((next(filler), "Unused item (stand-in)", {"dbsource": "carevue"}, "chartevents"))
    rows.sort(key=lambda r: r[0])

    def meta(k):
        return [r[2].get(k) or None for r in rows]

    return frame("D_ITEMS", {
        "ROW_ID": np.arange(1, len(rows) + 1), "ITEMID": [r[0] for r in rows], "LABEL": [r[1] for r in rows],
        "ABBREVIATION": pl.Series([None] * len(rows), dtype=pl.String), "DBSOURCE": meta("dbsource"),
        "LINKSTO": [r[3] for r in rows], "CATEGORY": pl.Series(meta("category"), dtype=pl.String),
        "UNITNAME": pl.Series(meta("unitname"), dtype=pl.String),
        "PARAM_TYPE": pl.Series(meta("param_type"), dtype=pl.String),
        "CONCEPTID": pl.Series([None] * len(rows), dtype=pl.Int64),
    })


def d_labitemsframe(labs) -> pl.DataFrame:
    order = np.argsort(labs.itemid)
    return frame("D_LABITEMS", {
        "ROW_ID": np.arange(1, order.size + 1), "ITEMID": labs.itemid[order],
        "LABEL": [labs.label[i] for i in order], "FLUID": [labs.meta[i]["fluid"] or "Blood" for i in order],
        "CATEGORY": [labs.meta[i]["category"] or "Chemistry" for i in order],
        "LOINC_CODE": pl.Series([LOINC.get(int(labs.itemid[i])) for i in order], dtype=pl.String),
    })


def truthframe(c: Cohort, in_cohort: np.ndarray) -> pl.DataFrame:
    cols = {"hadm_id": c.hadm_id, "subject_id": c.subject_ids[c.adm_subject], "in_cohort": in_cohort}
    cols.update({f"z_{k}": c.z[:, k] for k in range(N_FACTORS)})
    for j, e in enumerate(EVENT_PLAN):
        cols[f"p_{e}"] = c.p[:, j]
        cols[f"c_{e}"] = c.c[:, j].astype(np.int8)
        cols[f"t_true_{e}"] = np.where(c.c[:, j], (c.event_time[:, j] - c.admit) / 3600.0, np.nan)
    return pl.DataFrame(cols).with_columns(pl.col("^t_true_.*$").fill_nan(None))


def _rates_by_db(total_rows: float, items, stay_hours: np.ndarray, stay_db: np.ndarray) -> np.ndarray:
    """Rows per ICU-stay hour for CareVue, MetaVision and 'both' stays, so that each system's
    share of the rows is its items' share in the catalogue (the release's CareVue/MetaVision mix)."""
    cv = items.weight[items.dbsource != "metavision"].sum()
    shares = np.array([cv, 1 - cv])
    h = np.array([stay_hours[stay_db == k].sum() for k in range(3)])
    both = h[2] / max(h.sum(), 1e-9)
    rates = (1 - both) * total_rows * shares / np.maximum(h[:2], 1e-9)
    return np.r_[rates, total_rows / max(h.sum(), 1e-9)]


def _chunks(n_adm: int, per_chunk: int):
    for lo in range(0, n_adm, per_chunk):
        yield np.arange(lo, min(n_adm, lo + per_chunk))


def existing(out_dir, scale: float, seed: int) -> bool:
    """Whether ``out_dir`` already holds a complete stand-in made with these parameters."""
    out = Path(out_dir)
    try:
        man = json.loads((out / "standin.json").read_text())
    except (OSError, json.JSONDecodeError):
        return False
    if (man.get("version"), man.get("scale"), man.get("seed")) != (GENERATOR_VERSION, scale, seed):
        return False
    return all((out / f"{t}.csv.gz").is_file() for t in TABLES)


def ensure_logged(dest: str, scale: float, seed: int, logger=log) -> str:
    """The build's stand-in step: ``ensure`` without a bar, and a line on ``logger``."""
    path = ensure(Path(dest), scale=scale, seed=seed, progress=False)
    logger.info("MIMIC stand-in (scale %s, seed %s) at %s", scale, seed, path)
    return str(path)


def generate_command(ap, args) -> str:
    """``python -m flows.mimic generate``: a stand-in in the full release's layout; returns its
    folder (a bad option or a folder in the way is a usage error)."""
    try:
        return str(generate(args.out, scale=args.scale, seed=args.seed, compresslevel=args.compresslevel,
                            overwrite=args.force))
    except (ValueError, FileExistsError) as exc:
        ap.error(str(exc))


def ensure(out_dir, scale: float, seed: int = 0, progress: bool = True, compresslevel: int = 1) -> Path:
    """The stand-in at ``out_dir``, generated only if it is not there yet with these parameters.

    This is the pipeline's working copy, staged at once, so it is written with gzip level 1: the
    same decompressed bytes as ``generate``'s default level 6 in 0.63 of the time, 26 % more disk
    (``benchmarks/bench_mimic_standin.py``). A stand-in already there is reused whatever its level.
    """
    if existing(out_dir, scale, seed):
        log.info("MIMIC stand-in at %s reused (scale %s, seed %s)", out_dir, scale, seed)
        return Path(out_dir)
    return generate(out_dir, scale=scale, seed=seed, compresslevel=compresslevel, progress=progress, overwrite=True)


def generate(out_dir, scale: float = 0.1, seed: int = 0, compresslevel: int = 6, progress: bool = True,
             overwrite: bool = False, threads: int | None = None) -> Path:
    """Write the stand-in folder; returns its path. ``scale`` 1.0 is the full release's size."""
    if not 0 < scale <= 1:
        raise ValueError(f"scale must be in (0, 1] (1 = the full release), got {scale}")
    out = refuse_non_empty(Path(out_dir), overwrite)
    if list(EVENT_PLAN) != list(EVENTS):
        raise RuntimeError("EVENT_PLAN and mimic_build.EVENTS must list the same events in the same order")
    started = time.perf_counter()
    n_adm = max(5, round(FULL_RELEASE["ADMISSIONS"] * scale))
    structure = plant_structure(seed)
    cohort = make_cohort(n_adm, structure, seed)
    chart, labs, outputs = load_items("chartevents"), load_items("labevents"), load_items("outputevents")
    event_ids = {i for ids in EVENTS.values() for i in ids}
    lab_draw = labs.subset(~np.isin(labs.itemid, list(event_ids)))
    chart_s, lab_s, out_s = Sampler.for_items(chart), Sampler.for_items(lab_draw), Sampler.for_items(outputs)
    chart_v, lab_v = Vocab.for_items(chart), Vocab.for_items(lab_draw)
    chart_f, lab_f = factor_lookup(chart), factor_lookup(lab_draw)

    hours = (cohort.outtime - cohort.intime) / 3600
    adm_hours = (cohort.disch - cohort.admit).sum() / 3600
    chart_rate = _rates_by_db(FULL_RELEASE["CHARTEVENTS"] * scale, chart, hours, cohort.db[cohort.stay_adm])
    out_rate = _rates_by_db(FULL_RELEASE["OUTPUTEVENTS"] * scale, outputs, hours, cohort.db[cohort.stay_adm])
    lab_total = FULL_RELEASE["LABEVENTS"] * scale
    lab_rate = max(lab_total * (1 - OUTPATIENT_LAB_SHARE) - n_adm * 7, 0) / adm_hours
    lab_out_mean = lab_total * OUTPATIENT_LAB_SHARE / n_adm
    per_chunk = max(1, int(CHUNK_CHART_ROWS / max(FULL_RELEASE["CHARTEVENTS"] * scale / n_adm, 1)))

    tmp = temporary_sibling(out)
    pool = ThreadPoolExecutor(max_workers=threads or max(1, min(4, os.cpu_count() or 1)))
    writers: dict[str, GzCsvWriter] = {}
    try:
        def writer(table):
            w = writers[table] = GzCsvWriter(
                tmp / f"{table}.csv.gz", [c for c, _ in TABLES[table]], pool, compresslevel
            )
            return w

        rng = np.random.default_rng([seed, 2])
        for table, frame in (("PATIENTS", patientsframe(cohort, rng)), ("ADMISSIONS", admissionsframe(cohort, rng)),
                             ("ICUSTAYS", icustaysframe(cohort, rng)), ("D_ITEMS", d_itemsframe(chart, outputs)),
                             ("D_LABITEMS", d_labitemsframe(labs))):
            writer(table).write(frame)
        wc, wl, wo = writer("CHARTEVENTS"), writer("LABEVENTS"), writer("OUTPUTEVENTS")
        valid_chart = np.zeros(n_adm, np.int64)
        stay_start = np.searchsorted(cohort.stay_adm, np.arange(n_adm + 1))
        bar = tqdm(total=n_adm, desc=f"MIMIC stand-in 1/{1 / scale:.0f}", unit="adm", disable=not progress)
        for k, adms in enumerate(_chunks(n_adm, per_chunk)):
            interrupts.check("generating the MIMIC stand-in")
            rng = np.random.default_rng([seed, 3, k])
            stays = np.arange(stay_start[adms[0]], stay_start[adms[-1] + 1])
            frame, row_adm = chart_chunk(cohort, stays, chart_rate, chart, chart_s, chart_v, chart_f, wc.rows + 1, rng)
            valid_chart += np.bincount(row_adm[row_adm >= 0], minlength=n_adm)
            wc.write(frame)
            wl.write(
                lab_chunk(cohort, adms, lab_rate, lab_out_mean, lab_draw, lab_s, lab_v, lab_f, EVENTS, wl.rows + 1, rng)
            )
            wo.write(output_chunk(cohort, stays, out_rate, outputs, out_s, wo.rows + 1, rng))
            bar.update(adms.size)
        bar.close()
        digests = {t: w.close() for t, w in writers.items()}
        rows = {t: w.rows for t, w in writers.items()}
        raw_bytes = {t: w.raw_bytes for t, w in writers.items()}
    except BaseException:
        for w in writers.values():
            w.abort()
        pool.shutdown(cancel_futures=True)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    pool.shutdown()

    in_cohort = valid_chart > 0  # every admission has lab rows; the cohort needs chart rows too
    truth = truthframe(cohort, in_cohort)
    truth.write_parquet(tmp / "standin_truth.parquet")
    (tmp / "SHA256SUMS.txt").write_text("".join(f"{digests[t]}  {t}.csv.gz\n" for t in sorted(digests)))
    oracle = {}
    for j, e in enumerate(EVENT_PLAN):
        cj, pj = cohort.c[in_cohort, j], cohort.p[in_cohort, j]
        oracle[e] = round(float(occurrence_auc(cj, pj)), 4) if 0 < cj.sum() < cj.size else None
    manifest = {
        "generator": "flows.lib.standin.mimic", "version": GENERATOR_VERSION, "scale": scale, "seed": seed,
        "compresslevel": compresslevel, "rows": rows, "raw_csv_bytes": raw_bytes, "sha256": digests,
        "admissions_in_cohort": int(in_cohort.sum()),
        "dialect": "upper-case quoted header; strings quoted, inner quotes doubled; numbers and "
                   "'YYYY-MM-DD HH:MM:SS' timestamps bare; NULL = empty unquoted field; LF; gzip",
        "origin": "ADMITTIME (no chart or admission lab row precedes it)",
        "truth_times": "hours from ADMITTIME to the first collection (the build adds 0.01 h)",
        "factors": {str(k): {"lab": FACTOR_LABS[k], "chart": list(FACTOR_CHART[k]) if k < len(FACTOR_CHART) else []}
                    for k in range(N_FACTORS)},
        "events": structure.as_json(list(EVENT_PLAN)),
        "prevalence_in_cohort": {e: round(float(cohort.c[in_cohort, j].mean()), 4) for j, e in enumerate(EVENT_PLAN)},
        "oracle_auc": oracle,
        "seconds": round(time.perf_counter() - started, 1),
    }
    (tmp / "standin.json").write_text(json.dumps(manifest, indent=2) + "\n")
    publish(tmp, out)
    log.info("MIMIC stand-in at 1/%.0f scale: %s chart rows in %.1f s -> %s", 1 / scale,
             f"{rows['CHARTEVENTS']:,}", manifest["seconds"], out)
    return out

"""CHARTEVENTS, LABEVENTS and OUTPUTEVENTS rows of the stand-in, one chunk of admissions at a time.

Each function takes the cohort, a slice of admissions and a seeded generator, and returns a
polars frame in the full-release column order with strings already quoted (``gz_csv``).
Everything is vectorised with numpy; rows are sorted by subject and time within a chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from flows.lib.mimic.schema import TABLES
from flows.lib.standin.gz_csv import quoted
from flows.lib.standin.mimic_cohort import FACTOR_CHART, FACTOR_LABS, Cohort
from flows.lib.standin.mimic_items import NUMERIC_AS_TEXT, ItemTable, pick_list

SIGNAL = 1.0  # a factor moves its items by this many item-SDs
ROW_NOISE = 0.6


@dataclass
class Vocab:
    """Per item: where its text values start in one shared list, and how many there are."""

    values: list[str]
    start: np.ndarray
    size: np.ndarray

    @classmethod
    def for_items(cls, items: ItemTable) -> Vocab:
        values = list(NUMERIC_AS_TEXT)
        start = np.zeros(items.itemid.size, np.int64)
        size = np.full(items.itemid.size, len(NUMERIC_AS_TEXT), np.int64)
        for i, (iid, label) in enumerate(zip(items.itemid, items.label, strict=True)):
            if not items.numeric[i]:
                vals = pick_list(int(iid), label)
                start[i], size[i] = len(values), len(vals)
                values.extend(vals)
        return cls(values, start, size)


@dataclass
class Sampler:
    """Draws item indices for rows, per database (carevue, metavision, both)."""

    groups: list[np.ndarray]  # item indices allowed for db 0, 1, 2
    cum: list[np.ndarray]

    @classmethod
    def for_items(cls, items: ItemTable) -> Sampler:
        masks = [items.dbsource != "metavision", items.dbsource != "carevue", np.ones(items.itemid.size, bool)]
        groups = [np.flatnonzero(m) for m in masks]
        cum = [np.cumsum(items.weight[g]) / items.weight[g].sum() for g in groups]
        return cls(groups, cum)

    def draw(self, db: np.ndarray, rng) -> np.ndarray:
        out = np.empty(db.size, np.int64)
        u = rng.random(db.size)
        for k in range(3):
            sel = db == k
            if sel.any():
                pos = np.minimum(np.searchsorted(self.cum[k], u[sel], side="right"), self.cum[k].size - 1)
                out[sel] = self.groups[k][pos]
        return out


def factor_lookup(items: ItemTable) -> np.ndarray:
    """Per item index: the latent factor that moves it, or -1."""
    f = np.full(items.itemid.size, -1, np.int64)
    pos = {int(i): k for k, i in enumerate(items.itemid)}
    for k, lab in enumerate(FACTOR_LABS):
        if lab in pos:
            f[pos[lab]] = k
    for k, pair in enumerate(FACTOR_CHART):
        for iid in pair:
            if iid in pos:
                f[pos[iid]] = k
    return f


def _format_numbers(x: np.ndarray, decimals: np.ndarray) -> pl.Series:
    scale = 10.0 ** decimals
    s = pl.Series(np.round(x * scale) / scale).cast(pl.String)
    return s.str.strip_suffix(".0")


def values(items: ItemTable, vocab: Vocab, item: np.ndarray, shift: np.ndarray, rng,
           p_text_in_numeric: float = 0.01, p_empty: float = 0.001) -> tuple[pl.Series, pl.Series, np.ndarray]:
    """VALUE (unquoted text) and VALUENUM (bare number text) series, and the numeric-row mask."""
    n = item.size
    numeric = items.numeric[item].copy()
    as_text = numeric & (rng.random(n) < p_text_in_numeric)
    numeric &= ~as_text
    num = items.base[item] + items.sd[item] * (ROW_NOISE * rng.standard_normal(n) + SIGNAL * shift)
    num = np.maximum(num, 0.0)
    num_str = _format_numbers(num, items.decimals[item])
    text_idx = vocab.start[item] + np.floor(rng.random(n) * vocab.size[item]).astype(np.int64)
    text = pl.Series(vocab.values, dtype=pl.String).gather(text_idx)
    empty = rng.random(n) < p_empty
    frame = pl.DataFrame({"num": num_str, "text": text, "numeric": numeric, "empty": empty})
    out = frame.select(
        value=pl.when(pl.col("empty")).then(None).when(pl.col("numeric")).then(pl.col("num")).otherwise(pl.col("text")),
        valuenum=pl.when(pl.col("numeric") & ~pl.col("empty")).then(pl.col("num")).otherwise(None),
    )
    return out["value"], out["valuenum"], numeric & ~empty


def null_where(values, mask) -> pl.Series:
    """``values`` (an array or a Series) with nulls where ``mask`` is true."""
    s = pl.Series(values)
    return s.scatter(np.flatnonzero(mask), None) if np.any(mask) else s


def _text_where(mask: np.ndarray, text: str) -> pl.Series:
    """``text`` where mask is true, null elsewhere."""
    return pl.select(pl.when(pl.Series(mask)).then(pl.lit(text))).to_series()


def timestamps(secs) -> pl.Series:
    """Epoch seconds as a datetime Series (the writer formats it)."""
    return pl.from_epoch(pl.Series(np.asarray(secs, dtype=np.int64)), time_unit="s")


def _units(items: ItemTable, item: np.ndarray) -> pl.Series:
    return pl.Series([u for u in items.unit], dtype=pl.String).gather(item)


def frame(table: str, cols: dict) -> pl.DataFrame:
    """Columns in file order; strings quoted; times formatted by the writer."""
    names = [c for c, _ in TABLES[table]]
    exprs = []
    for name in names:
        col = cols[name]
        s = col if isinstance(col, pl.Series) else pl.Series(col)
        exprs.append(s.alias(name))
    df = pl.DataFrame(exprs)
    types = dict(TABLES[table])
    return df.with_columns([quoted(c) for c in names if types[c] == "VARCHAR"])


def _sort(order_keys: tuple[np.ndarray, ...]) -> np.ndarray:
    return np.lexsort(order_keys[::-1])


def chart_chunk(cohort: Cohort, stays: np.ndarray, rate: np.ndarray, items: ItemTable, sampler: Sampler,
                vocab: Vocab, factors: np.ndarray, row_id0: int, rng) -> tuple[pl.DataFrame, np.ndarray]:
    """Rows of the given ICU stays; also returns, per row, the admission index (for counting)."""
    hours = (cohort.outtime[stays] - cohort.intime[stays]) / 3600
    stay = np.repeat(stays, rng.poisson(rate[cohort.db[cohort.stay_adm[stays]]] * hours))
    adm = cohort.stay_adm[stay]
    db = cohort.db[adm]
    item = sampler.draw(db, rng)
    t = cohort.intime[stay] + (rng.random(stay.size) * (cohort.outtime[stay] - cohort.intime[stay])).astype(np.int64)
    t = t // 60 * 60
    on_hour = (t + 3599) // 3600 * 3600
    t = np.where((rng.random(stay.size) < 0.85) & (on_hour <= cohort.outtime[stay]), on_hour, t)
    t = np.maximum(t, (cohort.intime[stay] + 59) // 60 * 60)  # never before INTIME (so never before ADMITTIME)
    order = _sort((cohort.adm_subject[adm], t, item))
    stay, adm, db, item, t = stay[order], adm[order], db[order], item[order], t[order]
    f = factors[item]
    shift = np.where(f >= 0, cohort.z[adm, np.maximum(f, 0)], 0.0)
    value, valuenum, _ = values(items, vocab, item, shift, rng)
    mv = items.dbsource[item] == "metavision"
    error = mv & (rng.random(item.size) < 0.0017)
    # ERROR = 1 rows carry implausible numbers: the build must drop them.
    bad = error & items.numeric[item]
    if bad.any():
        big = _format_numbers(items.base[item[bad]] * 50 + 999, np.zeros(bad.sum(), np.int64))
        value = value.scatter(np.flatnonzero(bad), big)
        valuenum = valuenum.scatter(np.flatnonzero(bad), big)
    warning = mv & (rng.random(item.size) < 0.01)
    cols = {
        "ROW_ID": np.arange(row_id0, row_id0 + item.size),
        "SUBJECT_ID": cohort.subject_ids[cohort.adm_subject[adm]],
        "HADM_ID": cohort.hadm_id[adm],
        "ICUSTAY_ID": null_where(cohort.icustay_id[stay], rng.random(item.size) < 0.005),
        "ITEMID": items.itemid[item],
        "CHARTTIME": timestamps(t),
        "STORETIME": timestamps(t + 60 * rng.integers(0, 90, item.size)),
        "CGID": rng.integers(14000, 21600, item.size),
        "VALUE": value,
        "VALUENUM": valuenum,
        "VALUEUOM": _units(items, item),
        "WARNING": null_where(warning.astype(np.int64), ~mv),
        "ERROR": null_where(error.astype(np.int64), ~mv),
        "RESULTSTATUS": pl.Series([None] * item.size, dtype=pl.String),
        "STOPPED": _text_where(~mv & (rng.random(item.size) < 0.6), "NotStopd"),
    }
    return frame("CHARTEVENTS", cols), np.where(error, -1, adm)


# Event lab values: (text values with probabilities, numeric (base, sd, decimals) or None, p_empty)
EVENT_VALUES: dict[str, tuple[list[tuple[str, float]], tuple[float, float, int] | None, float]] = {
    "Intubated": ([("INTUBATED", 0.7), ("NOT INTUBATED", 0.3)], None, 0.0),
    "Urobilinogen": ([("NEG", 0.75)], (1.0, 0.8, 1), 0.0),
    "Troponin_T": ([("<0.01", 0.2), ("LESS THAN 0.01", 0.05)], (0.3, 0.5, 2), 0.0),
    "TSH": ([("<0.02", 0.05)], (2.0, 1.5, 2), 0.0),
    "ANA": ([("POSITIVE", 0.3), ("NEGATIVE", 0.7)], None, 0.0),
    "D_Dimer": ([("<500", 0.2), (">10000", 0.05)], (1500.0, 1000.0, 0), 0.01),
    "WBC_CSF": ([], (5.0, 10.0, 0), 0.0), "WBC_Pleural": ([], (500.0, 400.0, 0), 0.0),
    "Ammonia": ([], (40.0, 25.0, 0), 0.0), "Lipase": ([], (60.0, 80.0, 0), 0.0),
}


def _event_values(event: str, n: int, rng) -> tuple[list, list]:
    texts, num, p_empty = EVENT_VALUES[event]
    u = rng.random(n)
    value, valuenum = [None] * n, [None] * n
    nums = (np.maximum(num[0] + num[1] * rng.standard_normal(n), 0.0) if num else np.zeros(n))
    fmt = f"{{:.{num[2]}f}}" if num else ""
    for i in range(n):
        acc = 0.0
        for text, p in texts:
            acc += p
            if u[i] < acc:
                value[i] = text
                break
        else:
            if num and u[i] < 1 - p_empty:
                value[i] = valuenum[i] = fmt.format(nums[i])
    return value, valuenum


def lab_chunk(cohort: Cohort, adms: np.ndarray, rate_in: float, mean_out: float, items: ItemTable,
              sampler: Sampler, vocab: Vocab, factors: np.ndarray, events: dict[str, list[int]],
              row_id0: int, rng) -> pl.DataFrame:
    """Admission labs (rate per hour of stay, at least one each), outpatient labs (no HADM_ID),
    the planted event collections, and a few event labs after discharge or outpatient."""
    los = cohort.disch[adms] - cohort.admit[adms]
    n_in = rng.poisson(rate_in * los / 3600) + 1
    n_out = rng.poisson(mean_out, adms.size)
    adm = np.concatenate([np.repeat(adms, n_in), np.repeat(adms, n_out)])
    inpatient = np.r_[np.ones(n_in.sum(), bool), np.zeros(n_out.sum(), bool)]
    lo, span = cohort.admit[adm], cohort.disch[adm] - cohort.admit[adm]
    t_in = lo + (rng.random(adm.size) * span).astype(np.int64)
    away = 3600 + (rng.random(adm.size) * 365 * 86400).astype(np.int64)
    t_out = np.where(rng.random(adm.size) < 0.5, cohort.admit[adm] - away, cohort.disch[adm] + away)
    t = np.where(inpatient, t_in, t_out) // 60 * 60
    item = sampler.draw(np.full(adm.size, 2), rng)
    f = factors[item]
    shift = np.where(inpatient & (f >= 0), cohort.z[adm, np.maximum(f, 0)], 0.0)
    value, valuenum, is_num = values(items, vocab, item, shift, rng, p_text_in_numeric=0.005, p_empty=0.0)
    dev = np.abs(shift) > 1.5
    flag = is_num & (dev | (rng.random(adm.size) < 0.15))

    # planted event labs
    ev_adm, ev_item, ev_t, ev_in, ev_val, ev_num = [], [], [], [], [], []
    names = list(events)
    for j, name in enumerate(names):
        ids = events[name]
        occ = adms[cohort.c[adms, j]]
        first = cohort.event_time[occ, j]
        reps = rng.poisson(1.2, occ.size)
        rep_adm = np.repeat(occ, reps)
        rep_first = np.repeat(first, reps)
        room = np.maximum((cohort.disch[rep_adm] - rep_first) // 60, 1)
        rep_t = rep_first + 60 * (1 + (rng.random(rep_adm.size) * room).astype(np.int64))
        rep_t = np.minimum(rep_t, cohort.disch[rep_adm])
        # a few collections that must NOT count: after discharge, or outpatient (no HADM_ID)
        not_occ = adms[~cohort.c[adms, j]]
        late = not_occ[rng.random(not_occ.size) < 0.005]
        late_t = cohort.disch[late] + 60 * rng.integers(60, 2880, late.size)
        outp = adms[rng.random(adms.size) < 0.01]
        outp_t = cohort.admit[outp] - 60 * rng.integers(60, 60 * 24 * 90, outp.size)
        a = np.concatenate([occ, rep_adm, late, outp])
        tt = np.concatenate([first, rep_t, late_t, outp_t])
        iid = np.where(rng.random(a.size) < 0.8, ids[-1], ids[0]) if len(ids) > 1 else np.full(a.size, ids[0])
        v, vn = _event_values(name, a.size, rng)
        ev_adm.append(a)
        ev_item.append(iid)
        ev_t.append(tt)
        ev_in.append(np.r_[np.ones(occ.size + rep_adm.size + late.size, bool), np.zeros(outp.size, bool)])
        ev_val += v
        ev_num += vn
    ev_adm, ev_item, ev_t, ev_in = (np.concatenate(x) for x in (ev_adm, ev_item, ev_t, ev_in))

    all_adm = np.concatenate([adm, ev_adm])
    all_item = np.concatenate([items.itemid[item], ev_item])
    all_t = np.concatenate([t, ev_t])
    all_in = np.concatenate([inpatient, ev_in])
    value = pl.concat([value, pl.Series(ev_val, dtype=pl.String)])
    valuenum = pl.concat([valuenum, pl.Series(ev_num, dtype=pl.String)])
    unit = pl.concat([_units(items, item), pl.Series([None] * ev_adm.size, dtype=pl.String)])
    flag = _text_where(np.concatenate([flag, np.zeros(ev_adm.size, bool)]), "abnormal")
    order = _sort((cohort.adm_subject[all_adm], all_t, all_item))
    idx = pl.Series(order)
    cols = {
        "ROW_ID": np.arange(row_id0, row_id0 + order.size),
        "SUBJECT_ID": cohort.subject_ids[cohort.adm_subject[all_adm[order]]],
        "HADM_ID": null_where(cohort.hadm_id[all_adm[order]], ~all_in[order]),
        "ITEMID": all_item[order], "CHARTTIME": timestamps(all_t[order]), "VALUE": value.gather(idx),
        "VALUENUM": valuenum.gather(idx), "VALUEUOM": unit.gather(idx), "FLAG": flag.gather(idx),
    }
    return frame("LABEVENTS", cols)


def output_chunk(cohort: Cohort, stays: np.ndarray, rate: np.ndarray, items: ItemTable, sampler: Sampler,
                 row_id0: int, rng) -> pl.DataFrame:
    hours = (cohort.outtime[stays] - cohort.intime[stays]) / 3600
    stay = np.repeat(stays, rng.poisson(rate[cohort.db[cohort.stay_adm[stays]]] * hours))
    adm = cohort.stay_adm[stay]
    item = sampler.draw(cohort.db[adm], rng)
    t = cohort.intime[stay] + (rng.random(stay.size) * (cohort.outtime[stay] - cohort.intime[stay])).astype(np.int64)
    t = np.maximum(t // 3600 * 3600, (cohort.intime[stay] + 59) // 60 * 60)
    order = _sort((cohort.adm_subject[adm], t, item))
    stay, adm, item, t = stay[order], adm[order], item[order], t[order]
    vol = np.round(np.maximum(items.base[item] + items.sd[item] * rng.standard_normal(item.size), 0.0))
    vol = np.where(rng.random(item.size) < 0.002, -vol, vol)  # negative volumes exist in the release
    mv = items.dbsource[item] == "metavision"
    iserror = mv & (rng.random(item.size) < 0.0005)
    vol = np.where(iserror, vol * 100 + 99999, vol)
    vol_s = null_where(vol.astype(np.int64), rng.random(item.size) < 0.01)
    cols = {
        "ROW_ID": np.arange(row_id0, row_id0 + item.size),
        "SUBJECT_ID": cohort.subject_ids[cohort.adm_subject[adm]],
        "HADM_ID": cohort.hadm_id[adm],
        "ICUSTAY_ID": cohort.icustay_id[stay],
        "CHARTTIME": timestamps(t),
        "ITEMID": items.itemid[item],
        "VALUE": vol_s,
        "VALUEUOM": pl.Series(np.where(mv, "mL", "ml")),
        "STORETIME": timestamps(t + 60 * rng.integers(0, 120, item.size)),
        "CGID": rng.integers(14000, 21600, item.size),
        "STOPPED": pl.Series([None] * item.size, dtype=pl.String),
        "NEWBOTTLE": pl.Series([None] * item.size, dtype=pl.String),
        "ISERROR": null_where(np.ones(item.size, np.int64), ~iserror),
    }
    return frame("OUTPUTEVENTS", cols)

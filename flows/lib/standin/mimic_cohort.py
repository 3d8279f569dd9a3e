"""Stand-in patients, admissions and ICU stays, and the planted structure with its truth.

Every admission gets K latent factors z ~ N(0, I). Factor k moves the values of a few real
feature items (a top lab for every k, a CareVue/MetaVision chart pair for some) in every row
of the admission, so the first-24-hour aggregates carry it. Event j is planted from disjoint
factor sets: occurrence c_j ~ Bernoulli(sigmoid(a_j + w_j . z[occ_j])) and timing
log t_j = log m_j + v_j . z[time_j] + g_j c_{d(j)} + sigma * eps, where d(j) is another event
(its "driver") and g_j = COUPLING_SHIFT < 0: when the driver occurs, event j's lab is drawn
earlier (a troponin that is ordered makes the follow-up work-up come sooner). This is the
dependence the paper's model exists for: one event's occurrence changes another's timing. The lab of event j is then
written at
ADMITTIME + t_j (and possibly again later); ADMITTIME is the origin the build computes,
because no chart or admission lab row precedes it. Discharge comes after every planted
event, so the truth equals what the build must recover.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

N_FACTORS = 8
SIGMA_TIME = 0.5
EPOCH_2100 = 4102444800  # 2100-01-01 00:00:00 UTC in seconds; MIMIC dates are shifted to 2100-2200

# A top lab item per factor, and chart (CareVue, MetaVision) pairs for the first four.
FACTOR_LABS = [51221, 50971, 50983, 50912, 50902, 51006, 50882, 51265]
FACTOR_CHART = [(211, 220045), (646, 220277), (618, 220210), (455, 220179)]

# event: (prevalence, median hours to the first collection); item ids come from mimic_build.EVENTS.
EVENT_PLAN: dict[str, tuple[float, float]] = {
    "WBC_CSF": (0.08, 60.0), "Troponin_T": (0.55, 8.0), "Intubated": (0.45, 6.0),
    "WBC_Pleural": (0.08, 72.0), "TSH": (0.33, 36.0), "D_Dimer": (0.12, 30.0),
    "Urobilinogen": (0.7, 20.0), "ANA": (0.06, 72.0), "Ammonia": (0.1, 24.0), "Lipase": (0.4, 14.0),
}
OCC_WEIGHT, TIME_WEIGHT = 1.5, 0.45
COUPLING_SHIFT = -0.8  # log-time shift of event j when its driver event occurs (x 0.45 in time)


@dataclass
class Structure:
    """Which factors drive which event, with what weights (the planted truth's parameters)."""

    occ_factors: np.ndarray  # (M, 2)
    occ_weights: np.ndarray  # (M, 2)
    intercepts: np.ndarray  # (M,)
    time_factors: np.ndarray  # (M, 2)
    time_weights: np.ndarray  # (M, 2)
    log_median: np.ndarray  # (M,)
    driver: np.ndarray  # (M,) the event whose occurrence shifts event j's log time
    coupling: np.ndarray  # (M,) that shift

    def as_json(self, events: list[str]) -> dict:
        out = {}
        for j, e in enumerate(events):
            out[e] = {
                "occurrence": {
                    "factors": self.occ_factors[j].tolist(),
                    "weights": self.occ_weights[j].round(4).tolist(),
                    "intercept": round(float(self.intercepts[j]), 4),
                },
                "timing": {
                    "factors": self.time_factors[j].tolist(),
                    "weights": self.time_weights[j].round(4).tolist(),
                    "median_hours": round(float(np.exp(self.log_median[j])), 4),
                    "sigma": SIGMA_TIME,
                    "driver_event": events[int(self.driver[j])],
                    "log_time_shift_if_driver_occurs": round(float(self.coupling[j]), 4),
                },
            }
        return out


def plant_structure(seed: int) -> Structure:
    rng = np.random.default_rng([seed, 7])
    m = len(EVENT_PLAN)
    occ, tim = np.empty((m, 2), int), np.empty((m, 2), int)
    for j in range(m):
        f = rng.permutation(N_FACTORS)[:4]
        occ[j], tim[j] = f[:2], f[2:]
    occ_w = OCC_WEIGHT * rng.choice([-1.0, 1.0], size=(m, 2))
    tim_w = TIME_WEIGHT * rng.choice([-1.0, 1.0], size=(m, 2))
    # Intercepts that give each event its planted prevalence (solved on a large z sample).
    z = np.random.default_rng([seed, 8]).standard_normal((200_000, 2))
    intercepts = np.empty(m)
    for j, (prev, _) in enumerate(EVENT_PLAN.values()):
        logits = z @ occ_w[j]
        lo, hi = -20.0, 20.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if (1 / (1 + np.exp(-(logits + mid)))).mean() < prev else (lo, mid)
        intercepts[j] = (lo + hi) / 2
    log_median = np.log([mh for _, mh in EVENT_PLAN.values()])
    shift = np.random.default_rng([seed, 9]).integers(1, m, m)  # a driver other than j itself
    driver = (np.arange(m) + shift) % m
    return Structure(occ, occ_w, intercepts, tim, tim_w, log_median, driver, np.full(m, COUPLING_SHIFT))


@dataclass
class Cohort:
    """Per-admission arrays (index a) and per-stay arrays (index s); times in epoch seconds."""

    subject_ids: np.ndarray  # per subject
    adm_subject: np.ndarray
    hadm_id: np.ndarray
    admit: np.ndarray
    disch: np.ndarray
    adm_type: np.ndarray  # index into ADMISSION_TYPES
    db: np.ndarray  # 0 carevue, 1 metavision, 2 both
    died: np.ndarray
    z: np.ndarray  # (A, K)
    p: np.ndarray  # (A, M) true occurrence probability
    c: np.ndarray  # (A, M) planted occurrence
    event_time: np.ndarray  # (A, M) epoch seconds of the first collection (0 where c = 0)
    stay_adm: np.ndarray  # per stay: its admission index
    icustay_id: np.ndarray
    intime: np.ndarray
    outtime: np.ndarray

    @property
    def n_admissions(self) -> int:
        return self.hadm_id.size


ADMISSION_TYPES = np.array(["EMERGENCY", "NEWBORN", "ELECTIVE", "URGENT"])
ADMISSION_TYPE_P = [0.71, 0.13, 0.13, 0.03]
DBSOURCES = np.array(["carevue", "metavision", "both"])


def _unique_ids(rng, n: int, lo: int, span: int) -> np.ndarray:
    span = max(span, 2 * n)
    return np.sort(rng.choice(span, size=n, replace=False)) + lo


def make_cohort(n_admissions: int, structure: Structure, seed: int) -> Cohort:
    rng = np.random.default_rng([seed, 1])
    a = n_admissions
    n_subj = max(1, round(a * 46_520 / 58_976))
    subject_ids = _unique_ids(rng, n_subj, 2, 99_998)
    adm_subject = np.concatenate([np.arange(n_subj), rng.integers(0, n_subj, a - n_subj)])
    rng.shuffle(adm_subject)
    hadm_id = rng.permutation(_unique_ids(rng, a, 100_001, 99_999))
    # a patient's admissions lie within a few years of each other (dates shifted to 2100-2200)
    subject_base = EPOCH_2100 + 60 * rng.integers(0, 95 * 365 * 1440, n_subj)
    admit = subject_base[adm_subject] + 60 * rng.integers(0, 4 * 365 * 1440, a)  # minute resolution
    adm_type = rng.choice(len(ADMISSION_TYPES), size=a, p=ADMISSION_TYPE_P)
    db = rng.choice(3, size=a, p=[0.58, 0.38, 0.04])
    has_icu = rng.random(a) > 0.02
    z = rng.standard_normal((a, N_FACTORS))

    # planted events
    m = structure.intercepts.size
    occ_logit = structure.intercepts + np.einsum("amf,mf->am", z[:, structure.occ_factors], structure.occ_weights)
    p = 1 / (1 + np.exp(-occ_logit))
    c = rng.random((a, m)) < p
    log_t = structure.log_median + np.einsum("amf,mf->am", z[:, structure.time_factors], structure.time_weights)
    log_t = log_t + structure.coupling * c[:, structure.driver]  # the driver's occurrence moves event j
    minutes = np.maximum(5, np.floor(60 * np.exp(log_t + SIGMA_TIME * rng.standard_normal((a, m)))))
    event_time = np.where(c, admit[:, None] + 60 * minutes.astype(np.int64), 0)

    # ICU stays: one, sometimes two, starting after ADMITTIME (INTIME has real seconds)
    n_stays = np.where(has_icu, 1 + (rng.random(a) < 0.065), 0)
    stay_adm = np.repeat(np.arange(a), n_stays)
    first = np.r_[True, stay_adm[1:] != stay_adm[:-1]] if stay_adm.size else np.zeros(0, bool)
    gap = np.where(first, rng.exponential(3 * 3600, stay_adm.size), rng.exponential(48 * 3600, stay_adm.size))
    dur = np.clip(rng.lognormal(np.log(48 * 3600), 0.8, stay_adm.size), 4 * 3600, 90 * 86400).astype(np.int64)
    intime = np.empty(stay_adm.size, np.int64)
    outtime = np.empty(stay_adm.size, np.int64)
    prev_end = admit.copy()
    for s in range(stay_adm.size):  # few stays per admission; a plain loop is clear and fast enough
        ad = stay_adm[s]
        intime[s] = prev_end[ad] + 1 + int(gap[s])
        outtime[s] = intime[s] + dur[s]
        prev_end[ad] = outtime[s]
    icustay_id = rng.permutation(_unique_ids(rng, stay_adm.size, 200_001, 99_999))

    last_event = np.where(c, event_time, 0).max(axis=1)
    stay_end = np.where(n_stays > 0, prev_end, admit + rng.lognormal(np.log(60 * 3600), 0.7, a).astype(np.int64))
    after = rng.exponential(36 * 3600, a).astype(np.int64)
    disch = np.maximum(stay_end + after, last_event + 3600 + rng.integers(0, 48 * 3600, a))
    disch = np.maximum(disch, admit + 6 * 3600)
    disch = (disch + 59) // 60 * 60  # minute resolution
    died = rng.random(a) < 0.1
    return Cohort(subject_ids, adm_subject, hadm_id, admit, disch, adm_type, db, died, z, p, c,
                  event_time, stay_adm, icustay_id, intime, outtime)

"""Both stand-ins plant the paper's premise: one event's occurrence moves another's timing.

Each generator draws event j's log time as a known function of latent inputs plus
COUPLING_SHIFT times the occurrence of j's driver event. Regressing the drawn log times on
those inputs and the driver's occurrence must give the shift back (and nothing where the
driver is replaced by an event that does not drive j), so a generator that stopped coupling
the events, or coupled the wrong ones, fails here.
"""

import numpy as np

from flows.lib.standin import mimic_cohort, reddit


def _shift(log_t: np.ndarray, inputs: np.ndarray, driver_occurs: np.ndarray) -> float:
    """OLS coefficient of the driver's occurrence in log_t ~ 1 + inputs + driver_occurs."""
    design = np.column_stack([np.ones(len(log_t)), inputs, driver_occurs.astype(float)])
    coef, *_ = np.linalg.lstsq(design, log_t, rcond=None)
    return float(coef[-1])


def test_mimic_standin_driver_occurrence_brings_the_lab_earlier():
    structure = mimic_cohort.plant_structure(0)
    cohort = mimic_cohort.make_cohort(20_000, structure, seed=0)
    minutes = (cohort.event_time - cohort.admit[:, None]) / 60.0
    m = structure.intercepts.size
    for j in range(m):
        rows = cohort.c[:, j] & (minutes[:, j] > 5)  # drawn times (the 5-minute floor is not one)
        z_time = cohort.z[rows][:, structure.time_factors[j]]
        log_t = np.log(minutes[rows, j])
        driver = int(structure.driver[j])
        assert driver != j
        shift = _shift(log_t, z_time, cohort.c[rows, driver])
        assert shift < -0.5 and abs(shift - mimic_cohort.COUPLING_SHIFT) < 0.12, (j, shift)
        other = next(k for k in range(m) if k not in (j, driver))
        assert abs(_shift(log_t, np.column_stack([z_time, cohort.c[rows, driver]]), cohort.c[rows, other])) < 0.1


def test_reddit_standin_driver_subreddit_brings_the_first_post_sooner():
    users = reddit.make_users(20_000, reddit.Months(), seed=0)
    inputs_shared = np.log(users.rate)
    for k in range(reddit.K):
        log_delay = np.log(users.delay_days[:, k])
        inputs = np.column_stack([inputs_shared, users.interest[:, k]])
        shift = _shift(log_delay, inputs, users.occur[:, reddit.DRIVER[k]])
        assert shift < -0.5 and abs(shift - reddit.COUPLING_SHIFT) < 0.1, (k, shift)

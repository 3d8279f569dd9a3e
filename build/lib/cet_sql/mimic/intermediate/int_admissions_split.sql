-- The split of each cohort admission, by patient: subject_splits (subject_id, split) is
-- drawn by the caller with a seeded permutation of the cohort's SUBJECT_IDs, so no patient
-- appears in two splits.
SELECT o.hadm_id, o.subject_id, s.split
FROM int_admissions_origin AS o
JOIN subject_splits AS s USING (subject_id)

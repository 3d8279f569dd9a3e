-- Admissions: one row per hospital admission (HADM_ID).
SELECT SUBJECT_ID AS subject_id, HADM_ID AS hadm_id, ADMITTIME AS admit_time, DISCHTIME AS disch_time
FROM read_parquet(getvariable('admissions_parquet'))

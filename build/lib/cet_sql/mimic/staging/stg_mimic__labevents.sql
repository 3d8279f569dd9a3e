-- Lab rows with an admission and a time (outpatient labs have no HADM_ID). A row counts even
-- when VALUENUM is null: text results such as 'NEG' or 'INTUBATED' are still collections.
SELECT HADM_ID AS hadm_id, ITEMID AS itemid, CHARTTIME AS chart_time, VALUENUM AS value_num
FROM read_parquet(getvariable('labevents_parquet'))
WHERE HADM_ID IS NOT NULL AND ITEMID IS NOT NULL AND CHARTTIME IS NOT NULL

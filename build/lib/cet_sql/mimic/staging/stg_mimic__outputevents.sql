-- Output rows with an admission and a time; VALUE is the volume (there is no VALUENUM).
-- ISERROR = 1 rows (a rare MetaVision flag) are dropped; negative volumes are kept as recorded.
SELECT HADM_ID AS hadm_id, ITEMID AS itemid, CHARTTIME AS chart_time, VALUE AS value_num
FROM read_parquet(getvariable('outputevents_parquet'))
WHERE HADM_ID IS NOT NULL AND ITEMID IS NOT NULL AND CHARTTIME IS NOT NULL AND ISERROR IS DISTINCT FROM 1

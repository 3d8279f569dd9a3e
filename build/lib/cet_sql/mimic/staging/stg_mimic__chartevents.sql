-- Chart rows with an admission and a time. ERROR IS DISTINCT FROM 1 keeps CareVue rows,
-- whose ERROR is NULL (a plain `<> 1` would drop every one of them).
SELECT HADM_ID AS hadm_id, ITEMID AS itemid, CHARTTIME AS chart_time, VALUENUM AS value_num
FROM read_parquet(getvariable('chartevents_parquet'))
WHERE HADM_ID IS NOT NULL AND ITEMID IS NOT NULL AND CHARTTIME IS NOT NULL AND ERROR IS DISTINCT FROM 1

-- One row per admission that has chart and lab rows (the cohort of the paper's code).
-- origin_time = the earliest of ADMITTIME, the first chart row and the first lab row; it is
-- the origin of both the feature window and the event times.
WITH chart AS (
    SELECT hadm_id, min(chart_time) AS first_chart_time FROM stg_mimic__chartevents GROUP BY hadm_id
), lab AS (
    SELECT hadm_id, min(chart_time) AS first_lab_time FROM stg_mimic__labevents GROUP BY hadm_id
), final AS (
    SELECT a.subject_id, a.hadm_id, a.admit_time, a.disch_time, c.first_chart_time, l.first_lab_time,
           least(a.admit_time, c.first_chart_time, l.first_lab_time) AS origin_time
    FROM stg_mimic__admissions AS a
    JOIN chart AS c USING (hadm_id)
    JOIN lab AS l USING (hadm_id)
)
SELECT * FROM final

-- One row per (cohort admission, source, item) with rows in the feature window
-- [origin_time, origin_time + $window_hours]: rows, numeric values, mean, min, max, sum.
-- source is 'chart', 'lab' or 'output'.
WITH events AS (
    SELECT 'chart' AS source, * FROM stg_mimic__chartevents
    UNION ALL SELECT 'lab', * FROM stg_mimic__labevents
    UNION ALL SELECT 'output', * FROM stg_mimic__outputevents
), windowed AS (
    SELECT e.source, e.hadm_id, e.itemid, e.value_num
    FROM events AS e
    JOIN int_admissions_origin AS o USING (hadm_id)
    WHERE e.chart_time >= o.origin_time AND e.chart_time <= o.origin_time + to_hours(CAST($window_hours AS BIGINT))
), final AS (
    SELECT source, hadm_id, itemid, count(*) AS n_rows, count(value_num) AS n_values, avg(value_num) AS value_mean,
           min(value_num) AS value_min, max(value_num) AS value_max, sum(value_num) AS value_sum
    FROM windowed
    GROUP BY source, hadm_id, itemid
)
SELECT * FROM final

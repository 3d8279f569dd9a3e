-- One row per (cohort admission, output item) with rows in the feature window
-- [origin_time, origin_time + $window_hours]: rows, values, mean, min, max, sum.
WITH windowed AS (
    SELECT e.hadm_id, e.itemid, e.value_num
    FROM stg_mimic__outputevents AS e
    JOIN int_admissions_origin AS o USING (hadm_id)
    WHERE e.chart_time >= o.origin_time AND e.chart_time <= o.origin_time + to_hours(CAST($window_hours AS BIGINT))
), final AS (
    SELECT hadm_id, itemid, count(*) AS n_rows, count(value_num) AS n_values, avg(value_num) AS value_mean,
           min(value_num) AS value_min, max(value_num) AS value_max, sum(value_num) AS value_sum
    FROM windowed
    GROUP BY hadm_id, itemid
)
SELECT * FROM final

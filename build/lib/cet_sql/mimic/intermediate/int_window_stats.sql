-- One row per (cohort admission, source, item) with rows in the feature window
-- [origin_time, origin_time + $window_hours]: rows, numeric values, mean, min, max, sum.
-- source is 'chart', 'lab' or 'output'.
-- Means and sums add DECIMAL(38, 9) values: integer addition, so the result does not depend on
-- the order in which DuckDB's threads combine rows. A double sum does, in its last bits, and
-- made two builds of the same input differ byte for byte. Each value is rounded to 1e-9 first
-- (MIMIC values carry at most a few decimals). A group holding a value that is not finite or
-- beyond ±1e18 keeps the plain double aggregate, which such a value dominates anyway.
WITH events AS (
    SELECT 'chart' AS source, * FROM stg_mimic__chartevents
    UNION ALL SELECT 'lab', * FROM stg_mimic__labevents
    UNION ALL SELECT 'output', * FROM stg_mimic__outputevents
), windowed AS (
    SELECT e.source, e.hadm_id, e.itemid, e.value_num,
           CASE WHEN isfinite(e.value_num) AND abs(e.value_num) < 1e18
                THEN CAST(e.value_num AS DECIMAL(38, 9)) END AS value_exact,
           e.value_num IS NOT NULL AND NOT (isfinite(e.value_num) AND abs(e.value_num) < 1e18) AS is_wild
    FROM events AS e
    JOIN int_admissions_origin AS o USING (hadm_id)
    WHERE e.chart_time >= o.origin_time AND e.chart_time <= o.origin_time + to_hours(CAST($window_hours AS BIGINT))
), final AS (
    SELECT source, hadm_id, itemid, count(*) AS n_rows, count(value_num) AS n_values,
           CASE WHEN bool_or(is_wild) THEN avg(value_num) ELSE CAST(avg(value_exact) AS DOUBLE) END AS value_mean,
           min(value_num) AS value_min, max(value_num) AS value_max,
           CASE WHEN bool_or(is_wild) THEN sum(value_num) ELSE CAST(sum(value_exact) AS DOUBLE) END AS value_sum
    FROM windowed
    GROUP BY source, hadm_id, itemid
)
SELECT * FROM final

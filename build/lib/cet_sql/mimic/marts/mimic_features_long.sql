-- Long-format features: one row per (cohort admission, feature) observed in the window.
-- Numeric chart/lab items: count, mean, min, max. Non-numeric chart/lab items: the count of
-- rows (not of numeric values). Output items: sum and count. Absent rows mean "no row in
-- the window": the caller fills counts and sums with 0 and imputes the rest.
WITH picked AS (
    SELECT s.*, i.is_numeric FROM int_window_stats AS s JOIN int_items_selected AS i USING (source, itemid)
), final AS (
    SELECT hadm_id, source || '_' || itemid || '_count' AS feature, CAST(n_rows AS DOUBLE) AS value FROM picked
    UNION ALL
    SELECT hadm_id, source || '_' || itemid || '_' || stat, value
    FROM picked
    CROSS JOIN LATERAL (VALUES ('mean', value_mean), ('min', value_min), ('max', value_max)) AS t(stat, value)
    WHERE source <> 'output' AND is_numeric AND value IS NOT NULL
    UNION ALL
    SELECT hadm_id, source || '_' || itemid || '_sum', coalesce(value_sum, 0.0) FROM picked WHERE source = 'output'
)
SELECT * FROM final

-- The feature items: the top $n_chart chart, $n_lab lab and $n_output output items by row
-- count inside the feature window, counted on TRAINING admissions only. The event labs and
-- $excluded_lab_itemids (SPECIMEN TYPE) are never features. An item is numeric when more
-- than half of its (training, in-window) rows have a numeric value.
WITH counted AS (
    SELECT w.source, w.itemid, CAST(sum(w.n_rows) AS BIGINT) AS train_rows,
           CAST(sum(w.n_values) AS BIGINT) AS train_values
    FROM int_window_stats AS w
    JOIN int_admissions_split AS s USING (hadm_id)
    WHERE s.split = 'train'
      AND NOT (w.source = 'lab' AND (list_contains($event_itemids, w.itemid)
                                     OR list_contains($excluded_lab_itemids, w.itemid)))
    GROUP BY w.source, w.itemid
), ranked AS (
    SELECT *, row_number() OVER (PARTITION BY source ORDER BY train_rows DESC, itemid) AS item_rank
    FROM counted
), final AS (
    SELECT r.source, r.itemid, coalesce(d.label, l.label) AS label, r.train_rows, r.train_values,
           r.train_values > 0.5 * r.train_rows AS is_numeric, r.item_rank
    FROM ranked AS r
    LEFT JOIN stg_mimic__d_items AS d ON r.source <> 'lab' AND d.itemid = r.itemid
    LEFT JOIN stg_mimic__d_labitems AS l ON r.source = 'lab' AND l.itemid = r.itemid
    WHERE (r.source = 'chart' AND r.item_rank <= $n_chart)
       OR (r.source = 'lab' AND r.item_rank <= $n_lab)
       OR (r.source = 'output' AND r.item_rank <= $n_output)
)
SELECT * FROM final

-- One row per (cohort admission, event): c = the event's lab is collected during the
-- admission (any row counts, even with a null value); its time is an explicit minimum over
-- CHARTTIME, in hours from origin_time. Follow-up ends at discharge: collections after
-- DISCHTIME do not count (n_after_discharge reports them).
WITH per_event AS (
    SELECT l.hadm_id, e.event,
           min(l.chart_time) FILTER (WHERE l.chart_time <= o.disch_time) AS first_time,
           count(*) FILTER (WHERE l.chart_time > o.disch_time) AS n_after_discharge
    FROM stg_mimic__labevents AS l
    JOIN event_items AS e USING (itemid)
    JOIN int_admissions_origin AS o USING (hadm_id)
    GROUP BY l.hadm_id, e.event
), final AS (
    SELECT o.hadm_id, ev.event, p.first_time IS NOT NULL AS occurred,
           date_diff('second', o.origin_time, p.first_time) / 3600.0 AS hours_to_event,
           coalesce(p.n_after_discharge, 0) AS n_after_discharge
    FROM int_admissions_origin AS o
    CROSS JOIN (SELECT DISTINCT event FROM event_items) AS ev
    LEFT JOIN per_event AS p ON p.hadm_id = o.hadm_id AND p.event = ev.event
)
SELECT * FROM final

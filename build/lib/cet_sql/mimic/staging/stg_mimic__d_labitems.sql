-- Lab item labels.
SELECT ITEMID AS itemid, LABEL AS label FROM read_parquet(getvariable('d_labitems_parquet'))

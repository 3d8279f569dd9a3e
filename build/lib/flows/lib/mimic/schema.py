"""MIMIC-III v1.4 tables the build reads: columns in file order with explicit DuckDB types.

Types follow mimic-code's DuckDB DDL. Every column is typed explicitly: sniffing fails on the
real files (CHARTEVENTS.VALUE looks numeric for millions of rows, then is not).
"""

from __future__ import annotations

INT, D, V, TS, S = "INTEGER", "DOUBLE", "VARCHAR", "TIMESTAMP", "SMALLINT"

TABLES: dict[str, list[tuple[str, str]]] = {
    "PATIENTS": [("ROW_ID", INT), ("SUBJECT_ID", INT), ("GENDER", V), ("DOB", TS), ("DOD", TS),
                 ("DOD_HOSP", TS), ("DOD_SSN", TS), ("EXPIRE_FLAG", INT)],
    "ADMISSIONS": [("ROW_ID", INT), ("SUBJECT_ID", INT), ("HADM_ID", INT), ("ADMITTIME", TS), ("DISCHTIME", TS),
                   ("DEATHTIME", TS), ("ADMISSION_TYPE", V), ("ADMISSION_LOCATION", V),
                   ("DISCHARGE_LOCATION", V), ("INSURANCE", V), ("LANGUAGE", V), ("RELIGION", V),
                   ("MARITAL_STATUS", V), ("ETHNICITY", V), ("EDREGTIME", TS), ("EDOUTTIME", TS),
                   ("DIAGNOSIS", V), ("HOSPITAL_EXPIRE_FLAG", S), ("HAS_CHARTEVENTS_DATA", S)],
    "ICUSTAYS": [("ROW_ID", INT), ("SUBJECT_ID", INT), ("HADM_ID", INT), ("ICUSTAY_ID", INT), ("DBSOURCE", V),
                 ("FIRST_CAREUNIT", V), ("LAST_CAREUNIT", V), ("FIRST_WARDID", S), ("LAST_WARDID", S),
                 ("INTIME", TS), ("OUTTIME", TS), ("LOS", D)],
    "CHARTEVENTS": [("ROW_ID", INT), ("SUBJECT_ID", INT), ("HADM_ID", INT), ("ICUSTAY_ID", INT), ("ITEMID", INT),
                    ("CHARTTIME", TS), ("STORETIME", TS), ("CGID", INT), ("VALUE", V), ("VALUENUM", D),
                    ("VALUEUOM", V), ("WARNING", INT), ("ERROR", INT), ("RESULTSTATUS", V), ("STOPPED", V)],
    "LABEVENTS": [("ROW_ID", INT), ("SUBJECT_ID", INT), ("HADM_ID", INT), ("ITEMID", INT), ("CHARTTIME", TS),
                  ("VALUE", V), ("VALUENUM", D), ("VALUEUOM", V), ("FLAG", V)],
    "OUTPUTEVENTS": [("ROW_ID", INT), ("SUBJECT_ID", INT), ("HADM_ID", INT), ("ICUSTAY_ID", INT), ("CHARTTIME", TS),
                     ("ITEMID", INT), ("VALUE", D), ("VALUEUOM", V), ("STORETIME", TS), ("CGID", INT),
                     ("STOPPED", V), ("NEWBOTTLE", V), ("ISERROR", INT)],
    "D_ITEMS": [("ROW_ID", INT), ("ITEMID", INT), ("LABEL", V), ("ABBREVIATION", V), ("DBSOURCE", V),
                ("LINKSTO", V), ("CATEGORY", V), ("UNITNAME", V), ("PARAM_TYPE", V), ("CONCEPTID", INT)],
    "D_LABITEMS": [("ROW_ID", INT), ("ITEMID", INT), ("LABEL", V), ("FLUID", V), ("CATEGORY", V),
                   ("LOINC_CODE", V)],
}

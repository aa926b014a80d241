DROP TABLE IF EXISTS audit_last_run;
DROP TABLE IF EXISTS settlement_totals;

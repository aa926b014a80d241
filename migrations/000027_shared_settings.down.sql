DROP TABLE shared_settings;

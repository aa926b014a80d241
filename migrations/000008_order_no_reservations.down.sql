DROP TABLE IF EXISTS order_no_reservations;

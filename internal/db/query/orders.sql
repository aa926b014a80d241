-- name: ReserveOrderNos :one
-- ReserveOrderNos adds a step to a shard's reserved range of order-number
-- counter values of a day (creating the row with the first step) and returns
-- the new end. The row lock orders concurrent reservations, so each gets the
-- range (end - step, end], disjoint from every other.
INSERT INTO order_no_reservations AS r (day, shard, reserved_upto)
VALUES (to_date(@day::text, 'YYYYMMDD'), @shard, @step)
ON CONFLICT (day, shard) DO UPDATE SET reserved_upto = r.reserved_upto + EXCLUDED.reserved_upto
RETURNING reserved_upto;

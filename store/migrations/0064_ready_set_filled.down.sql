-- Nothing to undo: 0063's down file drops what reads and keeps the set,
-- 0062's the set.
SELECT 1;

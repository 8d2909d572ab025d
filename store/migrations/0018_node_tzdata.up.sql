-- Each node reports the IANA release of the time zone rules compiled into
-- its binary (internal/tzdata): nodes on different builds can disagree on
-- when a cron entry fires, and the nodes view says so. '' is a node whose
-- binary predates this column (its rules came from its OS).

ALTER TABLE gaffer.nodes ADD COLUMN tzdata text NOT NULL DEFAULT '';

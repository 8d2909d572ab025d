ALTER TABLE gaffer.nodes DROP COLUMN tzdata;

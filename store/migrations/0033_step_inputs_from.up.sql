-- gaffer:expand
-- A workflow step's inputs by reference (issue 24): a step's job records
-- the jobs its dependencies were following when it started
-- (inputs_from), and its inputs are read from the run's steps whenever
-- the job is read, instead of a copy of every dependency's result in
-- every dependent's job. The routines that write it come with 0034.
-- Adding a nullable column rewrites nothing.
ALTER TABLE gaffer.jobs ADD COLUMN inputs_from bigint[];

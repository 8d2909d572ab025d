ALTER TABLE gaffer.jobs DROP COLUMN tracestate, DROP COLUMN traceparent;

DROP FUNCTION gaffer.append_attempt_error(jsonb, jsonb);

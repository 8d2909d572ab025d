DROP TABLE gaffer.idempotency_keys;
DROP TABLE gaffer.api_tokens;

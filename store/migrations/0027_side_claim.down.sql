DROP FUNCTION gaffer.claim_pick_units(text, integer, text, text[], text[]);

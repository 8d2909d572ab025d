DROP TABLE gaffer.ready_ring;
DROP TABLE gaffer.ready;

DROP TABLE gaffer.dlq;
DROP TABLE gaffer.queues;
DROP TABLE gaffer.jobs;

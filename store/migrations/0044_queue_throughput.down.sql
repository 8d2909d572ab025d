DROP TABLE gaffer.queue_throughput;

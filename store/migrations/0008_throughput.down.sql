DROP TABLE gaffer.throughput_samples;

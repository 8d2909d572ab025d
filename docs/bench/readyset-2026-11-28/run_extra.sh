HOLDER_READS_READY=1 flock /tmp/gaffer-bench.lock bash run.sh B 1 X_B_R1_holder_reads_ready

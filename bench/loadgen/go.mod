module durablekafka/bench/loadgen

go 1.22

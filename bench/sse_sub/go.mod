module durablekafka/bench/sse_sub

go 1.22

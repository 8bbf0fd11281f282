// Catch-up reads: a stream read from its start to its tail, chunk after chunk.
package main

import (
	"context"
	"fmt"
	"time"
)

// catchUp reads stream 0 from the start `count` times; MB/s over all of them.
func catchUp(t *Target, o Options) Report {
	tally := newTally()
	url := t.URL(0)
	started := time.Now()
	for i := 0; i < o.Count; i++ {
		got := readAll(t, url, tally)
		if o.ExpectBytes > 0 && got != o.ExpectBytes {
			tally.Failure("short", fmt.Sprintf("GET %s: read %d bytes, expected %d", url, got, o.ExpectBytes))
		}
	}
	report := tally.Report("catchup", time.Since(started))
	report.Extra = map[string]any{"reads": o.Count}
	return report
}

// readAll follows Stream-Next-Offset until Stream-Up-To-Date; each chunk is one sample.
// It returns the bytes read.
func readAll(t *Target, url string, tally *Tally) int64 {
	offset, total := "-1", int64(0)
	for {
		started := time.Now()
		r := t.Read(context.Background(), url, offset, "")
		if !r.OK() {
			tally.Failure(r.Label(), describe("GET", url+"?offset="+offset, r))
			return total
		}
		total += r.Bytes
		tally.Success(r.Status, time.Since(started), r.Bytes)
		next := r.Header.Get("Stream-Next-Offset")
		if r.Header.Get("Stream-Up-To-Date") == "true" || next == "" || next == offset {
			return total
		}
		offset = next
	}
}

// bulkCreate PUTs streams [Start, Start+Count) with Concurrency in flight.
func bulkCreate(t *Target, o Options) Report {
	tally := newTally()
	started := time.Now()
	t.createAll(o.Start, o.Count, o.Concurrency, tally)
	return tally.Report("create", time.Since(started))
}

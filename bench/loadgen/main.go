// Command loadgen drives a Durable Streams server over HTTP and prints one JSON report.
//
// Modes:
//
//	append    N streams x W writers, each appending back to back for D seconds (closed loop)
//	rate      the same writers, appends started at a fixed total rate (open loop)
//	latency   one operation at a time: -kind create|append|read|roundtrip|sse
//	catchup   read stream 0 from its start to its tail, -count times (MB/s)
//	create    PUT streams [start, start+count) with -concurrency in flight
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// Options are the command line's.
type Options struct {
	Mode, Kind, Prefix, ContentType, ProducerTag string
	Bases                                        []string
	Streams, Writers, Size, Count, WarmOps, Fill int
	Start, Concurrency                           int
	ExpectBytes                                  int64
	Rate                                         float64
	Warmup, Duration, Timeout                    time.Duration
	Producer, Create                             bool
}

func parse() Options {
	var o Options
	var bases, pids, brokers string
	var warmup, duration, timeout float64
	flag.StringVar(&o.Mode, "mode", "append", "append | rate | latency | catchup | create")
	flag.StringVar(&bases, "base", "http://127.0.0.1:4437", "base URLs, comma-separated")
	flag.StringVar(&o.Prefix, "prefix", "loadgen-", "stream names are <prefix><index>")
	flag.StringVar(&o.ContentType, "content-type", "text/plain", "of the streams")
	flag.StringVar(&o.Kind, "kind", "append", "latency: create | append | read | roundtrip | sse")
	flag.StringVar(&o.ProducerTag, "producer-tag", "p", "producer ids are <tag>-<stream>-<writer>")
	flag.IntVar(&o.Streams, "streams", 100, "streams written")
	flag.IntVar(&o.Writers, "writers", 1, "writers per stream")
	flag.IntVar(&o.Size, "size", 100, "bytes per append")
	flag.IntVar(&o.Count, "count", 100, "latency: timed operations; catchup: reads; create: streams")
	flag.IntVar(&o.WarmOps, "warm-ops", 10, "latency: untimed operations first")
	flag.IntVar(&o.Fill, "fill", 10, "latency read: appends in the stream read")
	flag.IntVar(&o.Start, "start", 0, "create: first stream index")
	flag.Int64Var(&o.ExpectBytes, "expect-bytes", 0, "catchup: bytes one read must return (0: any)")
	flag.IntVar(&o.Concurrency, "concurrency", 50, "create: requests in flight")
	flag.Float64Var(&o.Rate, "rate", 1000, "rate: appends per second in all")
	flag.Float64Var(&warmup, "warmup", 1, "seconds of load before the measured window")
	flag.Float64Var(&duration, "duration", 5, "seconds measured")
	flag.Float64Var(&timeout, "timeout", 30, "seconds per request")
	flag.BoolVar(&o.Producer, "producer", false, "send Producer-Id/Epoch/Seq with appends")
	flag.BoolVar(&o.Create, "create", false, "append, rate: PUT the streams first (not timed)")
	flag.StringVar(&pids, "server-pids", "", "count these processes' CPU while measured (comma-separated)")
	flag.StringVar(&brokers, "broker-pids", "", "count these processes' CPU while measured, apart")
	flag.Parse()
	serverPIDs, brokerPIDs = parsePIDs(pids), parsePIDs(brokers)
	o.Bases = strings.Split(bases, ",")
	o.Warmup = time.Duration(warmup * float64(time.Second))
	o.Duration = time.Duration(duration * float64(time.Second))
	o.Timeout = time.Duration(timeout * float64(time.Second))
	return o
}

func main() {
	o := parse()
	conns := max(o.Streams*o.Writers, o.Concurrency)
	t := newTarget(o.Bases, o.Prefix, o.ContentType, conns, o.Timeout)
	if (o.Mode == "append" || o.Mode == "rate") && o.Create {
		tally := newTally()
		t.createAll(0, o.Streams, min(o.Streams, 100), tally)
		if tally.errors > 0 {
			fmt.Fprintln(os.Stderr, "loadgen: creating the streams failed:", tally.samples)
			os.Exit(1)
		}
	}
	var report Report
	switch o.Mode {
	case "append":
		report = closedLoop(t, o)
	case "rate":
		report = openLoop(t, o)
	case "latency":
		report = sequential(t, o)
	case "catchup":
		report = catchUp(t, o)
	case "create":
		report = bulkCreate(t, o)
	default:
		fmt.Fprintln(os.Stderr, "loadgen: unknown mode", o.Mode)
		os.Exit(2)
	}
	emit(report)
}

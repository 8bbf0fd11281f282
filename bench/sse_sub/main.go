// Command sse_sub is the SSE fan-out benchmark's subscriber load: thousands of SSE
// connections in one process, each parsing its events and stamping every message's
// arrival, driven by bench/sse_fanout.py over stdin (commands) and stdout (JSON lines).
//
// A message is the text "m <seq> <unix ns at send> <phase>" (bench/fanout_load.py); the
// arrival time is taken when the network read that completes its event returns, as the
// Python worker does, so latency = append sent -> event read.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

type spec struct {
	urls     []string
	connect  int
	expected int
}

func main() {
	urlsFile := flag.String("urls", "", "file with one stream URL per subscriber")
	connect := flag.Int("connect", 100, "connects in flight")
	expected := flag.Int("expected", 2048, "initial size of each subscriber's seen-bitmap")
	flag.Parse()
	raiseFileLimit()
	data, err := os.ReadFile(*urlsFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sse_sub:", err)
		os.Exit(2)
	}
	urls := strings.Fields(string(data))
	run(spec{urls, *connect, *expected})
}

// raiseFileLimit lifts the soft RLIMIT_NOFILE to the hard limit: one socket per subscriber.
func raiseFileLimit() {
	var limit syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &limit) == nil && limit.Cur < limit.Max {
		limit.Cur = limit.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &limit)
	}
}

func run(s spec) {
	ctx, cancel := context.WithCancel(context.Background())
	totals := newTotals()
	client := newClient()
	gate := make(chan struct{}, max(1, s.connect))
	subs := make([]*subscriber, len(s.urls))
	var wg sync.WaitGroup
	for i, url := range s.urls {
		subs[i] = newSubscriber(url, totals, s.expected)
		wg.Add(1)
		go func(sub *subscriber) {
			defer wg.Done()
			sub.run(ctx, client, gate)
		}(subs[i])
	}
	out := newOutput()
	go report(ctx, out, subs, totals)
	lag := newLagWatch()
	go lag.run(ctx)
	commands(lag) // returns on "stop" or end of stdin
	cancel()
	waitBounded(&wg, 10*time.Second)
	out.send("result", result(subs, totals, lag))
}

func commands(lag *lagWatch) {
	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() {
		switch strings.TrimSpace(lines.Text()) {
		case "measure":
			lag.measuring.Store(true)
		case "end":
			lag.measuring.Store(false)
		case "stop":
			return
		}
	}
}

func waitBounded(wg *sync.WaitGroup, limit time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
	}
}

// output writes one JSON line per message: {"kind": ..., "payload": ...}.
type output struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func newOutput() *output { return &output{enc: json.NewEncoder(os.Stdout)} }

func (o *output) send(kind string, payload any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	_ = o.enc.Encode(map[string]any{"kind": kind, "payload": payload})
}

func report(ctx context.Context, out *output, subs []*subscriber, totals *totals) {
	ticker := time.NewTicker(500 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			out.send("status", status(subs, totals))
		}
	}
}

func status(subs []*subscriber, totals *totals) map[string]int64 {
	var connected, measured int64
	for _, sub := range subs {
		if sub.connected.Load() {
			connected++
		}
		measured += sub.measured.Load()
	}
	return map[string]int64{
		"connected": connected,
		"measured":  measured,
		"messages":  totals.messages.Load(),
		"errors":    totals.errors.Load(),
	}
}

package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const bucketUs = 100                 // latency histogram resolution, as the Python worker
const buckets = 300 * 1000_000 / 100 // 300 s; later arrivals land in the last bucket

// totals is what one process saw, summed over its subscribers.
type totals struct {
	histogram   []atomic.Int64
	maxUs       atomic.Int64
	errors      atomic.Int64
	disconnects atomic.Int64
	duplicates  atomic.Int64
	chunks      atomic.Int64
	messages    atomic.Int64
	mu          sync.Mutex
	samples     []string
}

func newTotals() *totals { return &totals{histogram: make([]atomic.Int64, buckets)} }

func (t *totals) latency(us int64) {
	t.histogram[min(us/bucketUs, buckets-1)].Add(1)
	for {
		old := t.maxUs.Load()
		if us <= old || t.maxUs.CompareAndSwap(old, us) {
			return
		}
	}
}

func (t *totals) error(err error) {
	t.errors.Add(1)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.samples) < 5 {
		t.samples = append(t.samples, fmt.Sprintf("%T: %v", err, err))
	}
}

// lagWatch samples how late a 50 ms sleep wakes while measuring: the client's own delay.
type lagWatch struct {
	measuring atomic.Bool
	mu        sync.Mutex
	lagsMs    []float64
}

func newLagWatch() *lagWatch { return &lagWatch{} }

func (l *lagWatch) run(ctx context.Context) {
	for ctx.Err() == nil {
		before := time.Now()
		sleep(ctx, 50*time.Millisecond)
		if l.measuring.Load() {
			lag := float64(time.Since(before)-50*time.Millisecond) / 1e6
			l.mu.Lock()
			l.lagsMs = append(l.lagsMs, lag)
			l.mu.Unlock()
		}
	}
}

func (l *lagWatch) percentiles() (p99, highest float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lagsMs) == 0 {
		return 0, 0
	}
	sorted := append([]float64(nil), l.lagsMs...)
	sort.Float64s(sorted)
	return sorted[len(sorted)*99/100], sorted[len(sorted)-1]
}

func result(subs []*subscriber, t *totals, lag *lagWatch) map[string]any {
	histogram := map[string]int64{}
	for bucket := range t.histogram {
		if count := t.histogram[bucket].Load(); count > 0 {
			histogram[strconv.Itoa(bucket)] = count
		}
	}
	received := make([]int64, len(subs))
	never := 0
	for i, sub := range subs {
		received[i] = sub.measured.Load()
		if !sub.connected.Load() {
			never++
		}
	}
	p99, highest := lag.percentiles()
	t.mu.Lock()
	samples := append([]string{}, t.samples...)
	t.mu.Unlock()
	return map[string]any{
		"histogram": histogram, "max_us": t.maxUs.Load(), "received": received,
		"never_connected": never, "errors": t.errors.Load(),
		"disconnects": t.disconnects.Load(), "duplicates": t.duplicates.Load(),
		"chunks": t.chunks.Load(), "messages": t.messages.Load(),
		"error_samples": samples, "lag_p99_ms": p99, "lag_max_ms": highest,
	}
}

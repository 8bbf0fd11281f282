// Latency samples, counts and the JSON report every mode prints.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"
)

// Tally collects outcomes from many goroutines.
type Tally struct {
	mu        sync.Mutex
	ok        int64
	errors    int64
	bytes     int64
	statuses  map[string]int64
	samples   []string
	latencies []time.Duration
	cpuStart  float64
	// The servers' and brokers' CPU seconds when the window opened and, once it closed, when it did.
	watchedStart, watchedEnd [2]float64
	closed                   bool
}

func newTally() *Tally {
	return &Tally{statuses: map[string]int64{}, cpuStart: cpuSeconds(), watchedStart: watched()}
}

// Restart sets the CPU baselines: the report counts this process's and the servers' CPU from now.
func (t *Tally) Restart() {
	t.mu.Lock()
	t.cpuStart = cpuSeconds()
	t.watchedStart = watched()
	t.mu.Unlock()
}

// Close ends the servers' CPU count when the measured window closes (requests still in
// flight then are not counted, so neither is their CPU).
func (t *Tally) Close() {
	t.mu.Lock()
	t.watchedEnd, t.closed = watched(), true
	t.mu.Unlock()
}

// Success records one request that answered 2xx after `took`.
func (t *Tally) Success(status int, took time.Duration, bytes int64) {
	t.mu.Lock()
	t.ok++
	t.bytes += bytes
	t.statuses[fmt.Sprint(status)]++
	t.latencies = append(t.latencies, took)
	t.mu.Unlock()
}

// Failure records one request that failed (transport error or non-2xx).
func (t *Tally) Failure(status string, sample string) {
	t.mu.Lock()
	t.errors++
	t.statuses[status]++
	if len(t.samples) < 5 || t.statuses[status] == 1 { // the first of each kind, at least
		t.samples = append(t.samples, sample)
	}
	t.mu.Unlock()
}

// Report is what a run prints on stdout, as one JSON object.
type Report struct {
	Mode         string           `json:"mode"`
	OK           int64            `json:"ok"`
	Errors       int64            `json:"errors"`
	Statuses     map[string]int64 `json:"statuses"`
	ErrorSamples []string         `json:"error_samples"`
	Seconds      float64          `json:"seconds"`
	Rate         float64          `json:"rate"`
	Bytes        int64            `json:"bytes"`
	MBPerS       float64          `json:"mb_per_s"`
	P50Ms        float64          `json:"p50_ms"`
	P90Ms        float64          `json:"p90_ms"`
	P99Ms        float64          `json:"p99_ms"`
	MaxMs        float64          `json:"max_ms"`
	MeanMs       float64          `json:"mean_ms"`
	CPUSeconds   float64          `json:"cpu_s"` // of this process, while measured
	// Of the -server-pids processes while measured; absent without them.
	ServerCPUSeconds *float64 `json:"server_cpu_s,omitempty"`
	// Of the -broker-pids processes while measured; absent without them.
	BrokerCPUSeconds *float64       `json:"broker_cpu_s,omitempty"`
	Extra            map[string]any `json:"extra,omitempty"`
}

func (t *Tally) Report(mode string, elapsed time.Duration) Report {
	t.mu.Lock()
	defer t.mu.Unlock()
	seconds := elapsed.Seconds()
	r := Report{
		Mode: mode, OK: t.ok, Errors: t.errors, Statuses: t.statuses,
		ErrorSamples: t.samples, Seconds: seconds, Bytes: t.bytes,
	}
	if r.ErrorSamples == nil {
		r.ErrorSamples = []string{}
	}
	if seconds > 0 {
		r.Rate = float64(t.ok) / seconds
		r.MBPerS = float64(t.bytes) / seconds / 1e6
	}
	sorted := append([]time.Duration(nil), t.latencies...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	r.P50Ms, r.P90Ms, r.P99Ms = quantile(sorted, 0.50), quantile(sorted, 0.90), quantile(sorted, 0.99)
	if n := len(sorted); n > 0 {
		r.MaxMs = ms(sorted[n-1])
		var sum time.Duration
		for _, d := range sorted {
			sum += d
		}
		r.MeanMs = ms(sum / time.Duration(n))
	}
	r.CPUSeconds = cpuSeconds() - t.cpuStart
	end := t.watchedEnd
	if !t.closed {
		end = watched()
	}
	if len(serverPIDs) > 0 {
		server := end[0] - t.watchedStart[0]
		r.ServerCPUSeconds = &server
	}
	if len(brokerPIDs) > 0 {
		broker := end[1] - t.watchedStart[1]
		r.BrokerCPUSeconds = &broker
	}
	return r
}

func quantile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	index := int(q * float64(len(sorted)))
	if index >= len(sorted) {
		index = len(sorted) - 1
	}
	return ms(sorted[index])
}

func ms(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}

// cpuSeconds is this process's user + system CPU time so far.
func cpuSeconds() float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(usage.Utime) + tv(usage.Stime)
}

func emit(r Report) {
	encoder := json.NewEncoder(os.Stdout)
	if err := encoder.Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen: cannot write the report:", err)
		os.Exit(1)
	}
}

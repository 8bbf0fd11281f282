// Append load: closed loop (writers as fast as they can) and open loop (a fixed rate).
package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Writer appends to one stream, with producer headers if it has a producer id.
type Writer struct {
	url      string
	producer string
	seq      int64
}

func (w *Writer) headers() map[string]string {
	if w.producer == "" {
		return nil
	}
	return map[string]string{
		"Producer-Id":    w.producer,
		"Producer-Epoch": "0",
		"Producer-Seq":   fmt.Sprint(w.seq),
	}
}

// once appends one body; a success counts only when `measured` says the window is open, a
// failure always (one in the warm-up or after the window is a failed request all the same).
func (w *Writer) once(t *Target, body []byte, tally *Tally, measured func() bool) {
	started := time.Now()
	r := t.Append(context.Background(), w.url, body, w.headers())
	took := time.Since(started)
	if !r.OK() {
		tally.Failure(r.Label(), describe("POST", w.url, r))
		return
	}
	w.seq++
	if measured() {
		tally.Success(r.Status, took, int64(len(body)))
	}
}

func writers(t *Target, o Options) []*Writer {
	all := make([]*Writer, 0, o.Streams*o.Writers)
	for i := 0; i < o.Streams; i++ {
		for k := 0; k < o.Writers; k++ {
			w := &Writer{url: t.URL(i)}
			if o.Producer {
				w.producer = fmt.Sprintf("%s-%d-%d", o.ProducerTag, i, k)
			}
			all = append(all, w)
		}
	}
	return all
}

// window: warm-up, then `duration` measured; reports whether a moment is inside it.
type window struct {
	open, closed atomic.Bool
}

func (w *window) run(warmup, duration time.Duration, tally *Tally) time.Duration {
	time.Sleep(warmup)
	tally.Restart()
	w.open.Store(true)
	started := time.Now()
	time.Sleep(duration)
	w.closed.Store(true)
	tally.Close()
	return time.Since(started)
}

func (w *window) measured() bool { return w.open.Load() && !w.closed.Load() }

// closedLoop: every writer appends back to back until the window closes.
func closedLoop(t *Target, o Options) Report {
	tally, win := newTally(), &window{}
	body := payload(o.Size)
	var group sync.WaitGroup
	for _, w := range writers(t, o) {
		group.Add(1)
		go func(w *Writer) {
			defer group.Done()
			for !win.closed.Load() {
				w.once(t, body, tally, win.measured)
			}
		}(w)
	}
	elapsed := win.run(o.Warmup, o.Duration, tally)
	group.Wait()
	return tally.Report("append", elapsed)
}

// openLoop: appends start at a fixed total rate, round-robin over writers; each writer
// sends one at a time, so an arrival finding its writer busy queues behind it and its
// latency counts from when it was due (no coordinated omission).
func openLoop(t *Target, o Options) Report {
	tally, win := newTally(), &window{}
	body := payload(o.Size)
	all := writers(t, o)
	queues := make([]chan time.Time, len(all))
	var group sync.WaitGroup
	for i, w := range all {
		queues[i] = make(chan time.Time, 4096)
		group.Add(1)
		go func(w *Writer, due chan time.Time) {
			defer group.Done()
			for at := range due {
				inWindow := win.measured()
				r := t.Append(context.Background(), w.url, body, w.headers())
				if r.OK() {
					w.seq++
				}
				if !inWindow {
					continue
				}
				if r.OK() {
					tally.Success(r.Status, time.Since(at), int64(len(body)))
				} else {
					tally.Failure(r.Label(), describe("POST", w.url, r))
				}
			}
		}(w, queues[i])
	}
	interval := time.Duration(float64(time.Second) / o.Rate)
	stop := make(chan struct{})
	go func() {
		next, k := time.Now(), 0
		for {
			select {
			case <-stop:
				for _, q := range queues {
					close(q)
				}
				return
			default:
			}
			time.Sleep(time.Until(next))
			queues[k%len(queues)] <- next
			k++
			next = next.Add(interval)
		}
	}()
	elapsed := win.run(o.Warmup, o.Duration, tally)
	close(stop)
	group.Wait()
	return tally.Report("rate", elapsed)
}

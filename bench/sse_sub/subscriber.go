package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"
)

var offsetKey = []byte(`"streamNextOffset":"`)
var messageMark = []byte("data:m ")

func newClient() *http.Client {
	dialer := &net.Dialer{Timeout: 30 * time.Second}
	transport := &http.Transport{
		DialContext:           dialer.DialContext,
		DisableCompression:    true,
		MaxIdleConnsPerHost:   -1,
		ResponseHeaderTimeout: 60 * time.Second,
		ReadBufferSize:        16 * 1024,
		WriteBufferSize:       4 * 1024,
	}
	return &http.Client{Transport: transport}
}

// subscriber is one SSE connection, resumed from its last control offset if it ends.
type subscriber struct {
	url       string
	totals    *totals
	offset    string
	pending   []byte
	seen      []byte
	measured  atomic.Int64 // distinct measured-phase messages received
	connected atomic.Bool
}

func newSubscriber(url string, totals *totals, expected int) *subscriber {
	return &subscriber{url: url, totals: totals, offset: "now", seen: make([]byte, expected)}
}

// run holds a connect slot until the first control event, so connects ramp up gradually.
func (s *subscriber) run(ctx context.Context, client *http.Client, gate chan struct{}) {
	holding := true
	select {
	case gate <- struct{}{}:
	case <-ctx.Done():
		return
	}
	release := func() {
		if holding {
			holding = false
			<-gate
		}
	}
	defer release()
	for ctx.Err() == nil {
		err := s.tail(ctx, client, release)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			s.totals.disconnects.Add(1)
		default:
			s.totals.error(err)
			sleep(ctx, 500*time.Millisecond)
		}
	}
}

func (s *subscriber) tail(ctx context.Context, client *http.Client, connected func()) error {
	query := url.Values{"offset": {s.offset}, "live": {"sse"}}
	request, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"?"+query.Encode(), nil)
	if err != nil {
		return err
	}
	response, err := client.Do(request)
	if err != nil {
		return err
	}
	defer response.Body.Close()
	if response.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(io.LimitReader(response.Body, 200))
		return fmt.Errorf("status %d: %s", response.StatusCode, text)
	}
	s.pending = s.pending[:0]
	buffer := make([]byte, 32*1024)
	for {
		n, err := response.Body.Read(buffer)
		if n > 0 {
			s.feed(buffer[:n], time.Now().UnixNano())
			if s.connected.Load() {
				connected()
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// feed takes the complete events in chunk, plus what was left over from the last read.
func (s *subscriber) feed(chunk []byte, nowNs int64) {
	s.totals.chunks.Add(1)
	data := chunk
	if len(s.pending) > 0 {
		data = append(s.pending, chunk...)
	}
	end := bytes.LastIndex(data, []byte("\n\n"))
	if end < 0 {
		s.pending = append(s.pending[:0:0], data...)
		return
	}
	events := data[:end]
	s.pending = append(s.pending[:0:0], data[end+2:]...)
	s.messages(events, nowNs)
	if at := bytes.LastIndex(events, offsetKey); at >= 0 {
		at += len(offsetKey)
		if stop := bytes.IndexByte(events[at:], '"'); stop >= 0 {
			s.offset = string(events[at : at+stop])
			s.connected.Store(true)
		}
	}
}

func (s *subscriber) messages(events []byte, nowNs int64) {
	for {
		at := bytes.Index(events, messageMark)
		if at < 0 {
			return
		}
		events = events[at+len(messageMark):]
		seq, rest, ok := number(events)
		if !ok {
			continue
		}
		sent, rest, ok := number(rest)
		if !ok || len(rest) == 0 {
			continue
		}
		s.message(int(seq), sent, rest[0], nowNs)
		events = rest
	}
}

// number parses "<digits> " at the start of b.
func number(b []byte) (int64, []byte, bool) {
	stop := bytes.IndexByte(b, ' ')
	if stop <= 0 {
		return 0, b, false
	}
	value, err := strconv.ParseInt(string(b[:stop]), 10, 64)
	return value, b[stop+1:], err == nil
}

func (s *subscriber) message(seq int, sentNs int64, phase byte, nowNs int64) {
	if seq >= len(s.seen) {
		s.seen = append(s.seen, make([]byte, seq+1024-len(s.seen))...)
	}
	if s.seen[seq] != 0 {
		s.totals.duplicates.Add(1)
		return
	}
	s.seen[seq] = 1
	s.totals.messages.Add(1)
	if phase != 'M' {
		return
	}
	s.measured.Add(1)
	s.totals.latency(max(0, (nowNs-sentNs)/1000))
}

func sleep(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

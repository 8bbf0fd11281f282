// Sequential latency: one operation at a time, each timed on its own.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// sequential runs `count` operations (after `warm` untimed ones) of one kind.
func sequential(t *Target, o Options) Report {
	tally := newTally()
	op, err := operation(t, o)
	if err != nil {
		tally.Failure("setup", err.Error())
		return tally.Report("latency-"+o.Kind, 0)
	}
	for i := 0; i < o.WarmOps; i++ {
		op(i, newTally())
	}
	tally.Restart()
	started := time.Now()
	for i := 0; i < o.Count; i++ {
		op(o.WarmOps+i, tally)
	}
	return tally.Report("latency-"+o.Kind, time.Since(started))
}

type op func(i int, tally *Tally)

func operation(t *Target, o Options) (op, error) {
	body := payload(o.Size)
	url := t.URL(0)
	switch o.Kind {
	case "create":
		return func(i int, tally *Tally) { timed(tally, "PUT", t.URL(i+1), o.Size, t.Create) }, nil
	case "append":
		if r := t.Create(context.Background(), url); !r.OK() {
			return nil, errors.New(describe("PUT", url, r))
		}
		return func(_ int, tally *Tally) {
			timed(tally, "POST", url, o.Size, func(ctx context.Context, u string) Result {
				return t.Append(ctx, u, body, nil)
			})
		}, nil
	case "read":
		if err := fill(t, url, body, o.Fill); err != nil {
			return nil, err
		}
		return func(_ int, tally *Tally) {
			timed(tally, "GET", url, 0, func(ctx context.Context, u string) Result {
				return t.Read(ctx, u, "-1", "")
			})
		}, nil
	case "roundtrip":
		return roundTrip(t, url, body)
	case "sse":
		if err := fill(t, url, body, 1); err != nil {
			return nil, err
		}
		return func(_ int, tally *Tally) { firstEvent(t, url, tally) }, nil
	}
	return nil, fmt.Errorf("unknown kind %q", o.Kind)
}

func timed(tally *Tally, method, url string, size int, call func(context.Context, string) Result) {
	started := time.Now()
	r := call(context.Background(), url)
	if r.OK() {
		tally.Success(r.Status, time.Since(started), r.Bytes+int64(size))
	} else {
		tally.Failure(r.Label(), describe(method, url, r))
	}
}

// fill creates the stream and appends `count` bodies.
func fill(t *Target, url string, body []byte, count int) error {
	if r := t.Create(context.Background(), url); !r.OK() {
		return errors.New(describe("PUT", url, r))
	}
	for i := 0; i < count; i++ {
		if r := t.Append(context.Background(), url, body, nil); !r.OK() {
			return errors.New(describe("POST", url, r))
		}
	}
	return nil
}

// roundTrip: a long-poll waits at the tail; the time from sending an append until that
// long-poll answers with it.
func roundTrip(t *Target, url string, body []byte) (op, error) {
	if err := fill(t, url, body, 1); err != nil {
		return nil, err
	}
	first := t.Read(context.Background(), url, "-1", "")
	offset := first.Header.Get("Stream-Next-Offset")
	if !first.OK() || offset == "" {
		return nil, errors.New(describe("GET", url, first))
	}
	return func(_ int, tally *Tally) {
		polled := make(chan Result, 1)
		go func() { polled <- t.Read(context.Background(), url, offset, "live=long-poll") }()
		time.Sleep(20 * time.Millisecond) // let the long-poll reach the server and wait
		started := time.Now()
		appended := t.Append(context.Background(), url, body, nil)
		r := <-polled
		took := time.Since(started)
		switch {
		case !appended.OK():
			tally.Failure(appended.Label(), describe("POST", url, appended))
		case !r.OK() || r.Status != http.StatusOK || r.Bytes == 0:
			tally.Failure(r.Label(), describe("GET long-poll", url, r)+" (no data)")
		default:
			tally.Success(r.Status, took, r.Bytes)
		}
		if next := appended.Header.Get("Stream-Next-Offset"); next != "" {
			offset = next
		}
	}, nil
}

// firstEvent: from sending an SSE read of the stream's start until its first data event
// has arrived in full.
func firstEvent(t *Target, url string, tally *Tally) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	started := time.Now()
	request, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"?offset=-1&live=sse", nil)
	if err != nil {
		tally.Failure("setup", err.Error())
		return
	}
	response, err := t.client.Do(request)
	if err != nil {
		tally.Failure("transport", describe("GET sse", url, Result{Err: err}))
		return
	}
	defer response.Body.Close()
	if response.StatusCode != http.StatusOK {
		tally.Failure(fmt.Sprint(response.StatusCode), describe("GET sse", url, Result{Status: response.StatusCode}))
		return
	}
	if n, err := readDataEvent(bufio.NewReader(response.Body)); err != nil {
		tally.Failure("sse", fmt.Sprintf("GET sse %s: %v", url, err))
	} else {
		tally.Success(http.StatusOK, time.Since(started), n)
	}
}

// readDataEvent reads lines until a complete `event: data` block; returns its size.
func readDataEvent(reader *bufio.Reader) (int64, error) {
	inData := false
	var size int64
	for {
		line, err := reader.ReadString('\n')
		if err != nil {
			return 0, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "event: data":
			inData = true
		case inData && strings.HasPrefix(line, "data:"):
			size += int64(len(line))
		case inData && line == "":
			return size, nil
		}
	}
}

// The HTTP side: one shared client, stream URLs, and the protocol's requests.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Target is where the streams live: one or more base URLs, streams spread round-robin.
type Target struct {
	client      *http.Client
	bases       []string
	prefix      string
	contentType string
}

func newTarget(bases []string, prefix, contentType string, conns int, timeout time.Duration) *Target {
	transport := &http.Transport{
		MaxIdleConns:        conns + 16,
		MaxIdleConnsPerHost: conns + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	client := &http.Client{Transport: transport, Timeout: timeout}
	return &Target{client: client, bases: bases, prefix: prefix, contentType: contentType}
}

// URL of stream number i.
func (t *Target) URL(i int) string {
	return fmt.Sprintf("%s/v1/stream/%s%d", t.bases[i%len(t.bases)], t.prefix, i)
}

// Result of one request: status (0 on a transport error), headers, body length, error.
type Result struct {
	Status int
	Header http.Header
	Bytes  int64
	Err    error
}

// OK is a 2xx answer.
func (r Result) OK() bool { return r.Err == nil && r.Status >= 200 && r.Status < 300 }

// Label for the status counts: the code, or "transport"; a 503 that does not say when to
// retry is "503-no-retry-after".
func (r Result) Label() string {
	if r.Err != nil {
		return "transport"
	}
	if r.Status == http.StatusServiceUnavailable && r.Header.Get("Retry-After") == "" {
		return "503-no-retry-after"
	}
	return fmt.Sprint(r.Status)
}

func (t *Target) do(ctx context.Context, method, url string, body []byte, header map[string]string) Result {
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	request, err := http.NewRequestWithContext(ctx, method, url, reader)
	if err != nil {
		return Result{Err: err}
	}
	request.Header.Set("Content-Type", t.contentType)
	for key, value := range header {
		request.Header.Set(key, value)
	}
	response, err := t.client.Do(request)
	if err != nil {
		return Result{Err: err}
	}
	defer response.Body.Close()
	n, err := io.Copy(io.Discard, response.Body)
	return Result{Status: response.StatusCode, Header: response.Header, Bytes: n, Err: err}
}

// createRetries bounds how often Create retries a 503 (a write slot changing owner).
const createRetries = 10

// Create is PUT on the stream (201 new, 200 already there with the same config). A 503 is
// retried after its Retry-After (1 s if absent or unreadable, at most 5 s), createRetries
// times at most: durable-kafka answers 503 while a stream's write slot changes owner.
func (t *Target) Create(ctx context.Context, url string) Result {
	r := t.do(ctx, http.MethodPut, url, nil, nil)
	for attempt := 0; attempt < createRetries && r.Err == nil && r.Status == http.StatusServiceUnavailable; attempt++ {
		select {
		case <-ctx.Done():
			return r
		case <-time.After(retryAfter(r.Header)):
		}
		r = t.do(ctx, http.MethodPut, url, nil, nil)
	}
	return r
}

// retryAfter is a 503's Retry-After in seconds: 1 s if absent or unreadable, at most 5 s.
func retryAfter(header http.Header) time.Duration {
	seconds, err := strconv.Atoi(header.Get("Retry-After"))
	if err != nil || seconds < 0 {
		seconds = 1
	}
	if seconds > 5 {
		seconds = 5
	}
	return time.Duration(seconds) * time.Second
}

// Append is POST of one body, with producer headers when given.
func (t *Target) Append(ctx context.Context, url string, body []byte, header map[string]string) Result {
	return t.do(ctx, http.MethodPost, url, body, header)
}

// Read is GET from an offset ("-1": the start), with extra query parameters.
func (t *Target) Read(ctx context.Context, url, offset, query string) Result {
	full := url + "?offset=" + offset
	if query != "" {
		full += "&" + query
	}
	return t.do(ctx, http.MethodGet, full, nil, nil)
}

// describe is an error sample: what was asked and what came back.
func describe(method, url string, r Result) string {
	if r.Err != nil {
		return fmt.Sprintf("%s %s: %v", method, url, r.Err)
	}
	return fmt.Sprintf("%s %s: HTTP %d", method, url, r.Status)
}

// createAll PUTs streams [first, first+count) with `workers` in flight; a failure is an error.
func (t *Target) createAll(first, count, workers int, tally *Tally) {
	jobs := make(chan int)
	done := make(chan struct{})
	for w := 0; w < workers; w++ {
		go func() {
			for i := range jobs {
				url := t.URL(i)
				started := time.Now()
				r := t.Create(context.Background(), url)
				if r.OK() {
					tally.Success(r.Status, time.Since(started), 0)
				} else {
					tally.Failure(r.Label(), describe("PUT", url, r))
				}
			}
			done <- struct{}{}
		}()
	}
	for i := first; i < first+count; i++ {
		jobs <- i
	}
	close(jobs)
	for w := 0; w < workers; w++ {
		<-done
	}
}

func payload(size int) []byte {
	return []byte(strings.Repeat("x", size))
}

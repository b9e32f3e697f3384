package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// get fetches url and returns the status, the Content-Type and the body.
func get(t *testing.T, method, url string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func TestServer(t *testing.T) {
	m, reg := newTest(t)
	exercise(m, "sda")

	var notReady atomic.Pointer[error]
	e := errors.New("disk model not loaded")
	notReady.Store(&e)
	ready := func() error {
		if p := notReady.Load(); p != nil {
			return *p
		}
		return nil
	}

	s, err := Listen("127.0.0.1:0", reg, ready, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addr().(*net.TCPAddr)
	if !addr.IP.IsLoopback() || addr.Port == 0 {
		t.Fatalf("bound to %v", addr)
	}
	base := "http://" + addr.String()

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()

	code, ctype, body := get(t, http.MethodGet, base+"/metrics")
	if code != http.StatusOK {
		t.Errorf("/metrics: %d", code)
	}
	if !strings.HasPrefix(ctype, "text/plain") {
		t.Errorf("/metrics Content-Type %q", ctype)
	}
	for _, want := range []string{
		`shadowtune_agent_window_simulated_service_seconds{candidate="bfq",device="sda"} 2`,
		`shadowtune_agent_device_setting_info{device="sda",read_ahead_kib="128",scheduler="mq-deadline",tunables=""} 1`,
		`shadowtune_agent_evaluation_duration_seconds_bucket{device="sda",le="0.05"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	if code, _, body := get(t, http.MethodGet, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	code, _, body = get(t, http.MethodGet, base+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "disk model not loaded") {
		t.Errorf("/readyz while not ready: %d %q", code, body)
	}
	notReady.Store(nil)
	if code, _, body := get(t, http.MethodGet, base+"/readyz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/readyz when ready: %d %q", code, body)
	}
	if code, _, _ := get(t, http.MethodHead, base+"/healthz"); code != http.StatusOK {
		t.Errorf("HEAD /healthz: %d", code)
	}
	if code, _, _ := get(t, http.MethodPost, base+"/healthz"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz: %d, want 405", code)
	}
	if code, _, _ := get(t, http.MethodGet, base+"/"); code != http.StatusNotFound {
		t.Errorf("GET /: %d, want 404", code)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	if c, err := net.DialTimeout("tcp", addr.String(), time.Second); err == nil {
		c.Close()
		t.Error("listener still open after shutdown")
	}
}

// TestHandlerNilReady: no readiness function means ready.
func TestHandlerNilReady(t *testing.T) {
	s, err := Listen("127.0.0.1:0", prometheus.NewRegistry(), nil, logr.Logger{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	if code, _, _ := get(t, http.MethodGet, "http://"+s.Addr().String()+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz with nil ready: %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}

func TestListenErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := Listen("", reg, nil, logr.Discard()); err == nil {
		t.Error(`Listen(""): no error`)
	}
	if _, err := Listen("127.0.0.1:0", nil, nil, logr.Discard()); err == nil {
		t.Error("Listen with nil Gatherer: no error")
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if _, err := Listen(busy.Addr().String(), reg, nil, logr.Discard()); err == nil {
		t.Error("Listen on a busy port: no error")
	}
	if err := Serve(t.Context(), busy.Addr().String(), reg, nil, logr.Discard()); err == nil {
		t.Error("Serve on a busy port: no error")
	}
}

// TestDisabled: "0" binds nothing and Serve returns nil when ctx is done.
func TestDisabled(t *testing.T) {
	s, err := Listen(DisabledBindAddress, prometheus.NewRegistry(), nil, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if s.Addr() != nil {
		t.Errorf("disabled server has address %v", s.Addr())
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, DisabledBindAddress, prometheus.NewRegistry(), nil, logr.Discard()) }()
	select {
	case err := <-done:
		t.Fatalf("disabled Serve returned before cancel: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("disabled Serve: %v", err)
	}
}

package metrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Bind addresses for the agent's --metrics-bind-address flag.
const (
	// DefaultBindAddress is loopback only, so that a host run of the agent
	// exposes nothing. The DaemonSet must set a pod-reachable address
	// (e.g. ":8080"): the kubelet's probes and Prometheus connect to the
	// pod IP, not to its loopback.
	DefaultBindAddress = "127.0.0.1:8080"
	// DisabledBindAddress turns the endpoint off.
	DisabledBindAddress = "0"
)

// shutdownTimeout bounds the graceful shutdown; then connections are closed.
const shutdownTimeout = 5 * time.Second

// Handler serves:
//   - GET /metrics: the metrics gathered from g, in the format the scraper
//     negotiates (text, OpenMetrics or protobuf);
//   - GET /healthz: 200 "ok" while the process runs;
//   - GET /readyz: 200 "ok" when ready returns nil (or ready is nil), else
//     503 with "not ready: " and the error. ready must be quick and must
//     not block.
//
// Other paths give 404 and other methods 405. Gathering errors are logged
// to logger and the metrics that could be gathered are still served.
func Handler(g prometheus.Gatherer, ready func() error, logger logr.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:            promLogger{logger},
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 2,
		EnableOpenMetrics:   true,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		plain(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil {
			if err := ready(); err != nil {
				plain(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
				return
			}
		}
		plain(w, http.StatusOK, "ok")
	})
	return mux
}

func plain(w http.ResponseWriter, code int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = fmt.Fprintln(w, body)
}

// Server is the HTTP endpoint of [Handler], bound but not yet serving.
type Server struct {
	ln  net.Listener // nil when disabled
	srv *http.Server
	log logr.Logger
}

// Listen binds addr (host:port; ":0" picks a free port) and returns the
// server, ready to [Server.Serve]. addr [DisabledBindAddress] ("0") gives a
// disabled server: nothing is bound and Serve only waits for its context.
// An empty addr is an error. Binding here, before serving, lets the agent
// fail at start-up on a bad or busy address.
func Listen(addr string, g prometheus.Gatherer, ready func() error, logger logr.Logger) (*Server, error) {
	s := &Server{log: logger.WithName("metrics-server")}
	switch addr {
	case DisabledBindAddress:
		return s, nil
	case "":
		return nil, errors.New(`metrics: empty bind address (use "0" to disable the endpoint)`)
	}
	if g == nil {
		return nil, errors.New("metrics: nil Gatherer")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	s.ln = ln
	s.srv = &http.Server{
		Handler:           Handler(g, ready, s.log),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          stdlog.New(logWriter{s.log}, "", 0),
	}
	return s, nil
}

// Addr is the bound address (with the port chosen for ":0"), or nil when
// the server is disabled.
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Serve serves until ctx is done, then shuts down gracefully (in-flight
// requests get up to 5 s) and returns nil. It returns early only with an
// error from the listener. Call it once.
func (s *Server) Serve(ctx context.Context) error {
	if s.ln == nil {
		s.log.V(1).Info("metrics endpoint disabled")
		<-ctx.Done()
		return nil
	}
	s.log.Info("serving metrics and health probes", "address", s.ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("metrics: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		s.log.Error(err, "graceful shutdown incomplete; closing connections")
		_ = s.srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics: serve: %w", err)
	}
	return nil
}

// Serve is [Listen] then [Server.Serve]: it serves [Handler] on addr until
// ctx is done and returns nil, or returns the error that stopped it. With
// addr "0" it serves nothing and returns nil when ctx is done.
func Serve(ctx context.Context, addr string, g prometheus.Gatherer, ready func() error, logger logr.Logger) error {
	s, err := Listen(addr, g, ready, logger)
	if err != nil {
		return err
	}
	return s.Serve(ctx)
}

// promLogger adapts logr to promhttp's error log.
type promLogger struct{ log logr.Logger }

func (l promLogger) Println(v ...any) {
	l.log.Error(nil, "serving metrics", "detail", fmt.Sprint(v...))
}

// logWriter adapts logr to net/http's error log.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info("http server", "detail", string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

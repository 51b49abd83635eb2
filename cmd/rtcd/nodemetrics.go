package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"rtcd/metrics"
)

// Bounds of the metrics listener of `rtcd media` (--metrics-listen): it
// answers a scraper and a health check, so small requests and quick
// answers are all it takes.
const (
	nodeMetricsReadHeaderTimeoutSeconds = 10
	nodeMetricsWriteTimeoutSeconds      = 30 // a scrape of a busy node's registry is a few KiB
	nodeMetricsIdleTimeoutSeconds       = 60
	nodeMetricsMaxHeaderBytes           = 16 * 1024
	nodeMetricsShutdownTimeoutSeconds   = 5
)

// listenNodeMetrics opens the node's metrics listener on addr, HOST:PORT;
// an empty addr means none (nil, nil).
func listenNodeMetrics(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("--metrics-listen=%q: want HOST:PORT", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	return ln, nil
}

// nodeMetricsServer serves a media node's registry at GET /metrics and
// "ok" at GET /healthz, as the control plane's private listener does.
type nodeMetricsServer struct {
	srv    *http.Server
	failed chan error // the serving error, if it stopped on its own
}

// serveNodeMetrics serves m on ln until stop; if serving fails on its own,
// it calls onFail (which stops the node: a node whose metrics cannot be
// scraped is not one an operator can run).
func serveNodeMetrics(ln net.Listener, m *metrics.Node, onFail func()) *nodeMetricsServer {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	s := &nodeMetricsServer{
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: nodeMetricsReadHeaderTimeoutSeconds * time.Second,
			WriteTimeout:      nodeMetricsWriteTimeoutSeconds * time.Second,
			IdleTimeout:       nodeMetricsIdleTimeoutSeconds * time.Second,
			MaxHeaderBytes:    nodeMetricsMaxHeaderBytes,
		},
		failed: make(chan error, 1),
	}
	go func() {
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.failed <- err
			onFail()
		}
	}()
	return s
}

// stop shuts the listener down and returns the error it failed with on its
// own, if it did.
func (s *nodeMetricsServer) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), nodeMetricsShutdownTimeoutSeconds*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	select {
	case err := <-s.failed:
		return fmt.Errorf("metrics listener: %w", err)
	default:
		return nil
	}
}

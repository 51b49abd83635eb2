package server

import (
	"fmt"
	"net"

	"rtcd/config"
)

// boundListeners are the sockets of `rtcd serve`. Start binds all of them
// before it opens the data directory: a start that cannot bind one (a port
// in use) fails before anything is created or bootstrapped, so it changes
// nothing, and the next start still prints the first-start API key.
type boundListeners struct {
	api     net.Listener // the public API (--listen), a drainListener
	private net.Listener // metrics, health, admin, media reports (--metrics-listen)
	media   net.Listener // the built-in media node (--media-listen); nil when it is empty
}

// bindListeners binds every listener of cfg, or none.
func bindListeners(cfg *config.Config) (*boundListeners, error) {
	b := &boundListeners{}
	var err error
	if b.api, err = listenDraining(cfg.Listen); err != nil {
		return nil, fmt.Errorf("listen %s (--listen, RTCD_LISTEN): %w", cfg.Listen, err)
	}
	if b.private, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
		b.close()
		return nil, fmt.Errorf("metrics listen %s (--metrics-listen, RTCD_METRICS_LISTEN): %w", cfg.MetricsListen, err)
	}
	if cfg.MediaListen != "" {
		if b.media, err = net.Listen("tcp", cfg.MediaListen); err != nil {
			b.close()
			return nil, fmt.Errorf("media listen %s (--media-listen, RTCD_MEDIA_LISTEN; empty runs no built-in media node): %w", cfg.MediaListen, err)
		}
	}
	return b, nil
}

// close closes every bound listener (closing one already closed is harmless).
func (b *boundListeners) close() {
	for _, ln := range []net.Listener{b.api, b.private, b.media} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}

// mediaDescription names where participants' media goes, for the start
// log line: the built-in node's address, or the node run on its own.
func (s *Server) mediaDescription() string {
	switch {
	case s.media != nil:
		return s.media.ln.Addr().String()
	case s.cfg.MediaControlURL != "":
		return "a node run on its own, controlled at " + s.cfg.MediaControlURL
	}
	return "none"
}

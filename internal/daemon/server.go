package daemon

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/net/netutil"
)

// Limits bound what one client can hold of an HTTP server: how long it may
// take to send a request and to take its answer, how long an idle
// connection stays open, and how many connections are open at once.
type Limits struct {
	ReadHeaderTimeout time.Duration // from accepting the connection (or the last answer) to the end of the header
	ReadTimeout       time.Duration // to the end of the request, body included
	WriteTimeout      time.Duration // from the end of the header to the end of the answer
	IdleTimeout       time.Duration // a kept-alive connection waiting for its next request
	MaxConns          int           // connections open at once; more wait to be accepted
}

// DefaultLimits are both daemons' limits but for the connection cap, which
// is a setting. The write timeout covers any answer but a long poll's, which
// moves its own deadline past its wait: a grab waits at most its pipeline's
// 10 s, a readiness probe 2 s.
func DefaultLimits(maxConns int) Limits {
	return Limits{
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxConns:          maxConns,
	}
}

// Server is an HTTP server and the cap on its connections.
type Server struct {
	HTTP     *http.Server
	maxConns int
}

// NewServer returns a server of h within lim, logging net/http's own
// complaints (an accept that failed for want of file descriptors, a bad TLS
// handshake, a panic it recovered) through log as warnings: each is
// something going wrong that an operator filtering out info must still see.
// Every request, OPTIONS * included, is h's to answer, so that each answer
// carries h's request id and error shape.
func NewServer(h http.Handler, log *zap.Logger, lim Limits) *Server {
	return &Server{
		HTTP: &http.Server{
			Handler:                      h,
			DisableGeneralOptionsHandler: true,
			ReadHeaderTimeout:            lim.ReadHeaderTimeout,
			ReadTimeout:                  lim.ReadTimeout,
			WriteTimeout:                 lim.WriteTimeout,
			IdleTimeout:                  lim.IdleTimeout,
			ErrorLog:                     warnLog(log),
		},
		maxConns: lim.MaxConns,
	}
}

// warnLog is a standard logger writing through log at warn level.
func warnLog(log *zap.Logger) *stdlog.Logger {
	l, err := zap.NewStdLogAt(log, zapcore.WarnLevel)
	if err != nil { // only for a level zap does not have
		panic(err)
	}
	return l
}

// Serve runs srv on addr until ctx ends, then shuts it down, letting requests
// in hand finish for up to grace. It returns when the server has stopped.
func Serve(ctx context.Context, log *zap.Logger, srv *Server, addr string, grace time.Duration) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ServeListener(ctx, log, srv, ln, grace)
}

// ServeListener is Serve on a listener already open, which it closes.
func ServeListener(ctx context.Context, log *zap.Logger, srv *Server, ln net.Listener, grace time.Duration) error {
	addr := ln.Addr().String()
	log.Info("listening", zap.String("addr", addr), zap.Int("max_conns", srv.maxConns))
	if srv.maxConns > 0 {
		// A connection past the cap waits in the kernel's accept queue
		// until one closes, rather than taking a goroutine and memory.
		ln = netutil.LimitListener(ln, srv.maxConns)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.HTTP.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.HTTP.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

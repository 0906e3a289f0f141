package daemon

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/api"
	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/mcpserver"
)

// webServer is triggerd's HTTP server. It starts serving with the first
// handler it is given and takes the next while it serves: while an
// external NATS cannot be reached at startup, ingest's routes alone, then
// everything.
type webServer struct {
	srv     *http.Server
	ln      net.Listener
	handler atomic.Pointer[http.Handler]
	// done is closed once Serve has returned, with its error in err; nil
	// until serve is first called.
	done chan struct{}
	err  error
}

func newWebServer(ln net.Listener, readTimeout time.Duration) *webServer {
	w := &webServer{ln: ln}
	w.srv = &http.Server{
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			(*w.handler.Load()).ServeHTTP(rw, r)
		}),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       readTimeout,
		// A body read to the end just before ReadTimeout still needs its
		// commit and answer: a write deadline equal to the read one cut
		// such a request off without a word.
		WriteTimeout:   readTimeout + 30*time.Second,
		IdleTimeout:    120 * time.Second,
		MaxHeaderBytes: 64 << 10,
	}
	return w
}

// serve answers every request from now on with h, starting the server
// the first time.
func (w *webServer) serve(h http.Handler) {
	w.handler.Store(&h)
	if w.done != nil {
		return
	}
	w.done = make(chan struct{})
	go func() {
		defer close(w.done)
		w.err = w.srv.Serve(w.ln)
	}()
}

// shutdown stops the server, if it serves, letting requests in flight
// finish until ctx ends.
func (w *webServer) shutdown(ctx context.Context) error {
	if w.done == nil {
		return nil
	}
	err := w.srv.Shutdown(ctx)
	<-w.done
	return err
}

// newHandler routes triggerd's HTTP endpoints: the webhooks and probes
// (ingest), the management API and /metrics. Without mgmt (NATS not
// reached yet) the management API answers 503, saying why.
func newHandler(log zerolog.Logger, ing *ingest.Server, mgmt *api.API, con http.Handler, reg *prometheus.Registry) *echo.Echo {
	e := newEcho(log)
	ing.Register(e)
	if mgmt != nil {
		mgmt.Register(e)
	} else {
		unavailable := func(c echo.Context) error {
			c.Response().Header().Set("Retry-After", strconv.Itoa(5))
			return c.JSON(http.StatusServiceUnavailable, map[string]map[string]string{"error": {
				"code":    "unavailable",
				"message": "NATS is not reachable yet: the management API answers once triggerd has reached it (see its log and /readyz); retry later",
			}})
		}
		e.Any("/v1/*", unavailable)
		e.Any(mcpserver.Path, unavailable) // MCP (mcp.go) comes with the API
	}
	// Console (issue 38): its pages at /console/, or 503 until NATS.
	if con == nil {
		con = consoleUnavailable
	}
	e.Any("/console", echo.WrapHandler(con))
	e.Any("/console/*", echo.WrapHandler(con))
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
	return e
}

// Package reqctx is what the service knows of the HTTP request in hand,
// carried in its context: the request's id, the client that sent it (the
// name of its API key), the route that served it, and a logger that writes
// the id with every line. The API sets it up for each request; any code the
// request reaches logs through Logger so that its lines can be found by id.
package reqctx

import (
	"context"
	"sync"

	"go.uber.org/zap"

	"redpacket/internal/apikey"
)

// Info is one request's. The API fills Client and Route as it learns them,
// before the handler runs; nothing else changes it.
type Info struct {
	ID     string        // X-Request-Id: the client's, or one made for it
	Client string        // the API key's name; "" when the API takes no keys
	Scopes apikey.Scopes // what that key may do
	Route  string        // the route that served it, e.g. "POST /v1/envelopes/{id}/grab"; "" if none did

	base *zap.Logger
	once sync.Once
	log  *zap.Logger
}

// New returns the Info of a request whose lines base writes.
func New(id string, base *zap.Logger) *Info {
	if base == nil {
		base = zap.NewNop()
	}
	return &Info{ID: id, base: base}
}

type key struct{}

// With returns ctx carrying info.
func With(ctx context.Context, info *Info) context.Context {
	return context.WithValue(ctx, key{}, info)
}

// From returns the Info ctx carries, or nil.
func From(ctx context.Context) *Info {
	info, _ := ctx.Value(key{}).(*Info)
	return info
}

// ClientName returns the name of the API key that authenticated the
// request, and whether there is one (only with GRABBER_AUTH=keys).
func ClientName(ctx context.Context) (string, bool) {
	if info := From(ctx); info != nil && info.Client != "" {
		return info.Client, true
	}
	return "", false
}

// Logger returns the request's logger: fallback's lines with the request's
// id (and its client, once known) in every one. Outside a request, fallback.
func Logger(ctx context.Context, fallback *zap.Logger) *zap.Logger {
	info := From(ctx)
	if info == nil {
		return fallback
	}
	return info.Logger()
}

// Logger is the request's logger, made on first use: most requests log
// nothing, and then cost nothing here.
func (i *Info) Logger() *zap.Logger {
	i.once.Do(func() {
		fields := make([]zap.Field, 1, 2)
		fields[0] = zap.String("request_id", i.ID)
		if i.Client != "" {
			fields = append(fields, zap.String("client", i.Client))
		}
		i.log = i.base.WithLazy(fields...)
	})
	return i.log
}

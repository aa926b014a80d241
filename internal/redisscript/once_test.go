package redisscript_test

import (
	"bytes"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	rs "redpacket/internal/redisscript"
	"redpacket/internal/testenv"
)

// A script call whose reply is lost after Redis ran it fails, and is not
// sent again by the client on its own: a script that changes state would
// run twice and answer its second run.
func TestLostReplyIsNotSentAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testenv.Redis(t)
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	p := dropFirstReply(t, opts.Addr)
	opts.Addr = p.addr
	via := redis.NewClient(opts) // go-redis's defaults: three retries
	t.Cleanup(func() { _ = via.Close() })

	incr := rs.New("incr.lua", "local DONE = 0\nreturn {DONE, redis.call('INCR', KEYS[1])}", rs.Reply{Code: 0, Name: "DONE"})
	// Known to Redis beforehand, so the first call is EVALSHA and runs.
	if err := incr.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	key := prefix + ":runs"
	for _, call := range []struct {
		name string
		run  func() error
	}{
		{"Run", func() error { _, _, err := incr.Run(ctx, via, []string{key}); return err }},
		{"EvalSha in a pipeline", func() error {
			pipe := via.Pipeline()
			cmd := incr.EvalSha(ctx, pipe, []string{key})
			_, _ = pipe.Exec(ctx)
			return cmd.Err()
		}},
	} {
		before, _ := rdb.Get(ctx, key).Int64()
		p.armed.Store(true)
		if err := call.run(); err == nil {
			t.Errorf("%s: the reply was dropped, yet the call succeeded (sent again?)", call.name)
		}
		after, err := rdb.Get(ctx, key).Int64()
		if err != nil || after != before+1 {
			t.Errorf("%s: the script ran %d times (%v), want once", call.name, after-before, err)
		}
	}
}

// replyDropper forwards connections to a Redis; while armed, it closes the
// first connection that sends a script call as soon as Redis answers it,
// without passing the answer on.
type replyDropper struct {
	addr  string
	armed atomic.Bool
}

func dropFirstReply(t *testing.T, redisAddr string) *replyDropper {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &replyDropper{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { p.serve(client, redisAddr) })
		}
	})
	return p
}

func (p *replyDropper) serve(client net.Conn, redisAddr string) {
	defer func() { _ = client.Close() }()
	server, err := net.DialTimeout("tcp", redisAddr, 5*time.Second)
	if err != nil {
		return
	}
	defer func() { _ = server.Close() }()
	var script atomic.Bool // this connection sent a script call while armed
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				if bytes.Contains(bytes.ToLower(buf[:n]), []byte("eval")) && p.armed.CompareAndSwap(true, false) {
					script.Store(true)
				}
				if _, werr := server.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				_ = server.Close()
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if script.Load() {
			return // the answer is dropped with the connection
		}
		if n > 0 {
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

package grab_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/envelope"
	"redpacket/internal/grab"
	"redpacket/internal/limits"
	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
	"redpacket/internal/testenv/stack"
)

// loseReserve loses the answer of the next sender_reserve.lua call once
// armed, after Redis ran it, as a connection cut just after the call does.
type loseReserve struct {
	armed atomic.Bool
	lost  atomic.Int32
}

func (h *loseReserve) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *loseReserve) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *loseReserve) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		// sender_reserve.lua: two keys (the day's cents, the reservation)
		// and four arguments; sender_release.lua has no arguments.
		args := cmd.Args()
		if err == nil && len(args) == 9 && strings.HasPrefix(cmd.Name(), "eval") &&
			strings.Contains(args[3].(string), ":cents:") && h.armed.CompareAndSwap(true, false) {
			h.lost.Add(1)
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		}
		return err
	}
}

// A create whose reservation of the sender's cents ran in Redis but whose
// answer was lost writes nothing and gives the cents back: its retry is not
// refused for cents no envelope holds, and the cap still holds after it.
func TestCreateWhoseReservationAnswerWasLostGivesTheCentsBack(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := t.Context()
	rdb, prefix := testenv.Redis(t)
	hook := &loseReserve{}
	rdb.AddHook(hook)
	cfg := s.Config
	cfg.Safety.Limiter = limits.New(rdb, redisstore.NewKeys(prefix, 16), limits.Config{SenderDailyCents: 1000})
	svc := grab.New(cfg)

	hook.armed.Store(true)
	req := envelope.CreateRequest{SenderID: "alice", TotalCents: 600, Count: 2}
	_, err := svc.Create(ctx, req)
	if hook.lost.Load() != 1 || !errors.Is(err, grab.ErrUnavailable) {
		t.Fatalf("create whose reservation answer was lost: %v (%d answers lost), want unavailable",
			err, hook.lost.Load())
	}
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM envelopes WHERE sender_id = 'alice'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d envelopes of alice (%v), want none written", n, err)
	}
	if _, err := svc.Create(ctx, req); err != nil {
		t.Fatalf("retry of 600 of 1000 after a create that wrote nothing: %v", err)
	}
	capHolds(t, svc, "600 written")
}

package flush

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/envelope"
	"redpacket/internal/testenv/stack"
)

// failLastReloadStep fails the last step of a reload (reload.lua, whose
// fourth key is the staging list) until it is told not to, unsent.
type failLastReloadStep struct{ on bool }

func (h *failLastReloadStep) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *failLastReloadStep) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *failLastReloadStep) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		if h.on && len(a) > 6 && (cmd.Name() == "evalsha" || cmd.Name() == "eval") &&
			fmt.Sprint(a[2]) == "4" && strings.Contains(fmt.Sprint(a[6]), ":staging:") {
			err := errors.New("i/o timeout")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// A reload that stopped half-way (its claims written, the envelope not yet
// opened) leaves the envelope suspended, refusing grabs, and either action
// run again finishes it.
func TestReloadStoppedHalfWayIsFinishedByEither(t *testing.T) {
	t.Parallel()
	for _, action := range []Action{ActionReload, ActionRefund} {
		t.Run(string(action), func(t *testing.T) {
			t.Parallel()
			s := stack.New(t)
			ctx := context.Background()
			f := upkeepFlusher(t, s)
			id, claims := suspendedByLoss(t, s, f)
			h := &failLastReloadStep{on: true}
			s.RDB.(*redis.Client).AddHook(h)
			plan, err := f.PlanRecovery(ctx, id, ActionReload)
			if err != nil || plan.Blocked != "" {
				t.Fatalf("plan = %+v, %v", plan, err)
			}
			if _, err := f.Recover(ctx, plan); err == nil {
				t.Fatal("a reload whose last step failed reported no error")
			}
			if got := status(t, s, id); got != envelope.StatusSuspended {
				t.Fatalf("after the stopped reload the envelope is %s, want suspended", got)
			}
			if _, err := s.Svc.Grab(ctx, id, "newcomer"); err == nil {
				t.Fatal("a grab was granted by a reload that did not finish")
			}
			h.on = false
			plan, err = f.PlanRecovery(ctx, id, action)
			if err != nil || plan.Blocked != "" {
				t.Fatalf("plan after the stopped reload = %+v, %v", plan, err)
			}
			var text bytes.Buffer
			if err := plan.WriteText(&text); err != nil || !strings.Contains(text.String(), "stopped half-way (4 claims written back") {
				t.Errorf("plan after the stopped reload does not say so:\n%s", text.String())
			}
			st, err := f.Recover(ctx, plan)
			if err != nil {
				t.Fatalf("Recover after the stopped reload = %q, %v", st, err)
			}
			if action == ActionRefund {
				wantSettled(t, s, id, claims)
				return
			}
			for u, want := range claims {
				if got, err := s.Svc.Grab(ctx, id, u); err != nil || !got.Repeat || got.PacketID != want.PacketID {
					t.Errorf("holder %s after the reload: %+v, %v", u, got, err)
				}
			}
		})
	}
}

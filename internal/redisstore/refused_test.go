package redisstore

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/testenv"
)

// A grab script call Redis refused before running it took nothing, so a
// limited grab gives the user's reservation back; a call that may have run
// did not.
func TestRefusedUnrunTookNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		reply string
		took  bool // may have taken a packet
	}{
		{"MOVED 10697 127.0.0.1:7206", false},
		{"ASK 10697 127.0.0.1:7206", false},
		{"TRYAGAIN Multiple keys request during rehashing of slot", false},
		{"CLUSTERDOWN The cluster is down", false},
		{"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.", false},
		{"LOADING Redis is loading the dataset in memory", false},
		{"READONLY You can't write against a read only replica.", false},
		{"ERR Error running script (call to f_0): @user_script:9: -READONLY You can't write against a read only replica.", false},
		{"ERR Error running script (call to f_0): @user_script:9: out of memory", true},
		{"BUSY Redis is busy running a script.", true},
	} {
		rdb := redis.NewClient(&redis.Options{
			Addr: refusingRedis(t, tc.reply), Protocol: 2, DisableIdentity: true, MaxRetries: -1,
		})
		t.Cleanup(func() { _ = rdb.Close() })
		_, _, err := grabScript.Run(t.Context(), rdb, []string{"k"}, "a")
		if err == nil {
			t.Fatalf("%q: the call succeeded", tc.reply)
		}
		if got := TookNothing(err); got == tc.took {
			t.Errorf("%q: TookNothing(%v) = %v, want %v", tc.reply, err, got, !tc.took)
		}
	}
}

// refusingRedis is a server that answers every script call with the error
// reply.
func refusingRedis(t *testing.T, reply string) string {
	return testenv.FakeRedis(t, func(args []string) string {
		switch strings.ToUpper(args[0]) {
		case "EVAL", "EVALSHA":
			return "-" + reply + "\r\n"
		case "PING":
			return "+PONG\r\n"
		}
		return "+OK\r\n"
	})
}

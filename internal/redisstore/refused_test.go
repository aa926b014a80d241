package redisstore

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
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

// refusingRedis is a server that speaks enough RESP for a go-redis client
// and answers every script call with the error reply.
func refusingRedis(t *testing.T, reply string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go answer(c, reply)
		}
	}()
	return l.Addr().String()
}

func answer(c net.Conn, reply string) {
	defer func() { _ = c.Close() }()
	r := bufio.NewReader(c)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		out := "+OK\r\n"
		switch strings.ToUpper(args[0]) {
		case "EVAL", "EVALSHA":
			out = "-" + reply + "\r\n"
		case "HELLO": // the client falls back to RESP2
			out = "-ERR unknown command 'HELLO'\r\n"
		case "PING":
			out = "+PONG\r\n"
		}
		if _, err := c.Write([]byte(out)); err != nil {
			return
		}
	}
}

// readCommand reads one command: an array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil || n < 1 {
		return nil, net.ErrClosed
	}
	args := make([]string, n)
	for i := range args {
		head, err := r.ReadString('\n') // $len
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
		if err != nil || size < 0 {
			return nil, net.ErrClosed
		}
		v := make([]byte, size+2) // the value may hold line ends: read it by its length
		if _, err := io.ReadFull(r, v); err != nil {
			return nil, err
		}
		args[i] = string(v[:size])
	}
	return args, nil
}

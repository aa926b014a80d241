package testenv

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
)

// FakeRedis starts a server that speaks enough RESP for a go-redis client
// (Protocol 2, DisableIdentity) and returns its address: HELLO is refused,
// so the client falls back to RESP2, and every other command is answered
// with reply(its words), a raw RESP reply ("+OK\r\n", "-ERR ...\r\n"). For
// the answers a real Redis gives only in states a test cannot bring about
// (a slot moving, a cluster down, a dataset loading).
func FakeRedis(t testing.TB, reply func(args []string) string) string {
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
			go answerRESP(c, reply)
		}
	}()
	return l.Addr().String()
}

func answerRESP(c net.Conn, reply func(args []string) string) {
	defer func() { _ = c.Close() }()
	r := bufio.NewReader(c)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		out := "-ERR unknown command 'HELLO'\r\n"
		if !strings.EqualFold(args[0], "HELLO") {
			out = reply(args)
		}
		if _, err := io.WriteString(c, out); err != nil {
			return
		}
	}
}

// readCommand reads one command: an array of bulk strings, each read by its
// length (a script's source holds line ends).
func readCommand(r *bufio.Reader) ([]string, error) {
	n, err := readLength(r, "*")
	if err != nil || n < 1 {
		return nil, net.ErrClosed
	}
	args := make([]string, n)
	for i := range args {
		size, err := readLength(r, "$")
		if err != nil {
			return nil, err
		}
		v := make([]byte, size+2)
		if _, err := io.ReadFull(r, v); err != nil {
			return nil, err
		}
		args[i] = string(v[:size])
	}
	return args, nil
}

// readLength reads a "<mark><n>\r\n" line.
func readLength(r *bufio.Reader, mark string) (int, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, mark)))
	if err != nil || n < 0 {
		return 0, net.ErrClosed
	}
	return n, nil
}

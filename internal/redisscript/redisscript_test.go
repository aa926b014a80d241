package redisscript_test

import (
	"errors"
	"strings"
	"testing"

	rs "redpacket/internal/redisscript"
)

var errGone = errors.New("gone")

func script(src string) *rs.Script {
	return rs.New("t.lua", src, rs.Reply{Code: 0, Name: "DONE"}, rs.Reply{Code: 1, Name: "GONE", Err: errGone})
}

func TestParse(t *testing.T) {
	t.Parallel()
	s := script("")
	if code, payload, err := s.Parse([]any{int64(0), "x"}, nil); code != 0 || payload != "x" || err != nil {
		t.Errorf("{0, x} = %d, %#v, %v", code, payload, err)
	}
	if code, payload, err := s.Parse([]any{int64(0)}, nil); code != 0 || payload != nil || err != nil {
		t.Errorf("{0} = %d, %#v, %v", code, payload, err)
	}
	if _, _, err := s.Parse([]any{int64(1)}, nil); !errors.Is(err, errGone) {
		t.Errorf("{1} = %v, want the declared error", err)
	}
	sent := errors.New("connection refused")
	if _, _, err := s.Parse(nil, sent); !errors.Is(err, sent) {
		t.Errorf("a failed call = %v, want its error", err)
	}
	for _, v := range []any{nil, int64(0), "0", []any{}, []any{"0"}, []any{int64(2)}, []any{int64(0), 1, 2}} {
		if code, payload, err := s.Parse(v, nil); !errors.Is(err, rs.ErrReply) {
			t.Errorf("%#v = %d, %#v, %v; want ErrReply", v, code, payload, err)
		}
	}
}

func TestPayloadReaders(t *testing.T) {
	t.Parallel()
	if n, err := rs.Int(int64(7)); n != 7 || err != nil {
		t.Errorf("Int(7) = %d, %v", n, err)
	}
	if _, err := rs.Int("7"); !errors.Is(err, rs.ErrReply) {
		t.Errorf("Int(\"7\") = %v", err)
	}
	if _, err := rs.String(nil); !errors.Is(err, rs.ErrReply) {
		t.Errorf("String(nil) = %v", err)
	}
	if l, err := rs.List([]any{int64(1), "a"}, 2); len(l) != 2 || err != nil {
		t.Errorf("List = %v, %v", l, err)
	}
	if _, err := rs.List([]any{int64(1)}, 2); !errors.Is(err, rs.ErrReply) {
		t.Errorf("List of the wrong length = %v", err)
	}
	if l, err := rs.List(nil, -1); l != nil || err != nil {
		t.Errorf("List(nil, any) = %v, %v; want empty", l, err)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	good := `-- a script
local DONE, GONE = 0, 1
if redis.call('HGET', KEYS[1], 'status') == 'open' then
  return {DONE, string.match(ARGV[1], '^(%d+)$')}
end
return redis.error_reply('t: bad state') or {GONE}`
	if errs := script(good).Check([]string{"status", "open"}); len(errs) != 0 {
		t.Errorf("a good script: %v", errs)
	}
	for name, c := range map[string]struct {
		src, want string
	}{
		"code not in Go":      {strings.Replace(good, "DONE, GONE = 0, 1", "DONE, GONE, LOST = 0, 1, 2", 1) + " LOST", "LOST = 2 is not declared in Go"},
		"code missing in Lua": {strings.Replace(strings.ReplaceAll(good, "GONE", "DONE"), "DONE, DONE = 0, 1", "DONE = 0", 1), "GONE = 1, the script does not"},
		"value differs":       {strings.Replace(good, "= 0, 1", "= 0, 2", 1), "GONE is 2 in Lua, 1 in Go"},
		"bare number":         {strings.Replace(good, "return {DONE,", "return {0,", 1), "answers a bare number"},
		"unknown word":        {strings.Replace(good, "'open'", "'opened'", 1), "word 'opened'"},
		"double quotes":       {strings.Replace(good, "'open'", `"open"`, 1), "double-quoted"},
		"unused code":         {strings.Replace(good, "or {GONE}", "", 1), "GONE is declared but never used"},
	} {
		errs := script(c.src).Check([]string{"status", "open"})
		if !strings.Contains(errors.Join(errs...).Error()+" ", c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, errs, c.want)
		}
	}
}

// Package redisscript is the reply convention every Lua script of the service
// follows, and its check.
//
// A script answers {code, payload}: code is an integer naming the outcome,
// payload is the script's own (absent when it has nothing to say). The codes
// a script may answer are declared twice, each in one place: in the .lua file
// as ALL_CAPS locals (`local DONE, ALREADY = 0, 1`), and in Go as Reply
// values passed to New, each with the sentinel error the code means (nil for
// an outcome the caller reads the payload of). Run and Parse turn a reply into
// (code, payload) or that error; a reply of another shape, or a code the Go
// side does not declare, is an error, never a silent zero. Check, run by each
// package's tests, holds the two declarations to each other and every quoted
// word of the script to the Go constants it must be one of.
package redisscript

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Code is a script's reply code.
type Code int64

// Reply declares one code a script may answer.
type Reply struct {
	Code Code
	Name string // the local that holds it in the Lua source, e.g. "SOLD_OUT"
	Err  error  // what the code means as an error; nil when the caller reads the payload
}

// ErrReply is wrapped by every error about a reply's shape or code.
var ErrReply = errors.New("unexpected script reply")

// Script is an embedded Lua script with its declared reply codes.
type Script struct {
	*redis.Script
	name    string
	src     string
	replies []Reply
}

// New declares a script: its file name (for errors), its source and the
// codes it answers at the top level of its reply.
func New(name, src string, replies ...Reply) *Script {
	return &Script{Script: redis.NewScript(src), name: name, src: src, replies: replies}
}

// Name is the script's file name.
func (s *Script) Name() string { return s.name }

// Source is the script's Lua source.
func (s *Script) Source() string { return s.src }

// Sender is where a script call goes: a client, or a pipeline.
type Sender interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Run runs the script (EVALSHA, or EVAL when Redis does not have it yet)
// and reads its reply.
func (s *Script) Run(ctx context.Context, c Sender, keys []string, args ...any) (Code, any, error) {
	return s.Parse(s.RunCmd(ctx, c, keys, args...).Result())
}

// RunCmd is Run's command, for a caller that reads the reply itself.
func (s *Script) RunCmd(ctx context.Context, c Sender, keys []string, args ...any) *redis.Cmd {
	cmd := s.EvalSha(ctx, c, keys, args...)
	if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") { // refused unrun
		return s.Eval(ctx, c, keys, args...)
	}
	return cmd
}

// EvalSha sends the script by its hash, at most once (see once).
func (s *Script) EvalSha(ctx context.Context, c Sender, keys []string, args ...any) *redis.Cmd {
	return call(ctx, c, "evalsha", s.Hash(), keys, args)
}

// Eval sends the script with its source, at most once (see once).
func (s *Script) Eval(ctx context.Context, c Sender, keys []string, args ...any) *redis.Cmd {
	return call(ctx, c, "eval", s.src, keys, args)
}

// call builds the command as go-redis's own EVAL does (each argument as
// given: no caller passes a lone slice or map for go-redis to spread) and
// sends it at most once.
func call(ctx context.Context, c Sender, verb, body string, keys []string, args []any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, verb, body, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3) // where a cluster reads the slot
	}
	_ = c.Process(ctx, once{cmd})
	return cmd
}

// once is a script call go-redis sends at most once. By default go-redis
// sends a command again, on a new connection, when its reply is lost (the
// connection reset, a read timeout): a script that changes state then runs
// twice, and its second run answers as if the first had been someone else's
// (a grant comes back as the user's repeat, a reservation is given back
// twice). A call whose reply is lost fails instead, and its caller, which
// knows the call may have run, decides what to do; the service's callers
// treat such a failure as "may have run" already (a grab's reserved packet
// is kept, a flusher's batch is taken again and its claims are written
// idempotently).
type once struct{ *redis.Cmd }

// NoRetry tells go-redis not to send the call again.
func (once) NoRetry() bool { return true }

// Parse reads a reply received some other way (a pipeline): the code and the
// payload, or the error the code is declared with, or an error about the
// reply itself.
func (s *Script) Parse(v any, err error) (Code, any, error) {
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", s.name, err)
	}
	r, ok := v.([]any)
	if !ok || len(r) < 1 || len(r) > 2 {
		return 0, nil, fmt.Errorf("%s: %w: %#v is not {code, payload}", s.name, ErrReply, v)
	}
	n, ok := r[0].(int64)
	if !ok {
		return 0, nil, fmt.Errorf("%s: %w: code %#v is not an integer", s.name, ErrReply, r[0])
	}
	code := Code(n)
	i := slices.IndexFunc(s.replies, func(d Reply) bool { return d.Code == code })
	if i < 0 {
		return 0, nil, fmt.Errorf("%s: %w: code %d is not one it declares", s.name, ErrReply, n)
	}
	if e := s.replies[i].Err; e != nil {
		return code, nil, e
	}
	var payload any
	if len(r) == 2 {
		payload = r[1]
	}
	return code, payload, nil
}

// Int reads an integer payload.
func Int(payload any) (int64, error) {
	n, ok := payload.(int64)
	if !ok {
		return 0, fmt.Errorf("%w: payload %#v is not an integer", ErrReply, payload)
	}
	return n, nil
}

// String reads a string payload.
func String(payload any) (string, error) {
	s, ok := payload.(string)
	if !ok {
		return "", fmt.Errorf("%w: payload %#v is not a string", ErrReply, payload)
	}
	return s, nil
}

// List reads a list payload of exactly n elements (any length when n < 0).
func List(payload any, n int) ([]any, error) {
	l, ok := payload.([]any)
	if !ok && payload == nil && n <= 0 {
		return nil, nil // Redis turns an empty Lua table into an empty list, go-redis may read nil
	}
	if !ok || n >= 0 && len(l) != n {
		return nil, fmt.Errorf("%w: payload %#v is not a list of %d", ErrReply, payload, n)
	}
	return l, nil
}

var (
	luaComment = regexp.MustCompile(`--[^\n]*`)
	luaCodes   = regexp.MustCompile(`(?m)^local ([A-Z][A-Z0-9_]*(?:, *[A-Z][A-Z0-9_]*)*) *= *(-?\d+(?:, *-?\d+)*) *$`)
	luaWord    = regexp.MustCompile(`'([^'\\]*)'`)
	luaNumRet  = regexp.MustCompile(`return *\{? *-?\d`)
	redisWord  = regexp.MustCompile(`^[A-Z]+$`)
	punctOnly  = regexp.MustCompile(`^[^A-Za-z]*$`)
)

// Check holds the script's source to its Go declaration and returns every
// disagreement:
//   - the ALL_CAPS integer locals of the source are exactly the codes declared
//     (top-level ones and extra, e.g. per-item codes inside a payload), with
//     the same values, and each is used;
//   - no return statement answers a bare number instead of a named code, and
//     no string is double-quoted (the quoted words are checked below);
//   - every single-quoted word is a Redis command or argument (upper case),
//     a Lua pattern (holds %), an error message (holds a space), digits or
//     punctuation, or one of words: the statuses and field names the Go side
//     declares as constants.
func (s *Script) Check(words []string, extra ...Reply) []error {
	code := luaComment.ReplaceAllString(s.src, "")
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{s.name}, args...)...))
	}
	declared := map[string]Code{}
	for _, r := range append(slices.Clone(s.replies), extra...) {
		if prev, dup := declared[r.Name]; dup && prev != r.Code {
			bad("Go declares %s as both %d and %d", r.Name, prev, r.Code)
		}
		declared[r.Name] = r.Code
	}
	inLua := map[string]Code{}
	for _, m := range luaCodes.FindAllStringSubmatch(code, -1) {
		names, values := splitList(m[1]), splitList(m[2])
		if len(names) != len(values) {
			bad("%q declares %d names and %d values", m[0], len(names), len(values))
			continue
		}
		for i, n := range names {
			v, _ := strconv.ParseInt(values[i], 10, 64)
			inLua[n] = Code(v)
		}
	}
	for n, v := range inLua {
		switch want, ok := declared[n]; {
		case !ok:
			bad("code %s = %d is not declared in Go", n, v)
		case want != v:
			bad("code %s is %d in Lua, %d in Go", n, v, want)
		}
		if strings.Count(code, n) < 2 {
			bad("code %s is declared but never used", n)
		}
	}
	for n, v := range declared {
		if _, ok := inLua[n]; !ok {
			bad("Go declares code %s = %d, the script does not", n, v)
		}
	}
	if m := luaNumRet.FindString(code); m != "" {
		bad("%q answers a bare number; name the code", m)
	}
	if strings.Contains(code, `"`) {
		bad("double-quoted string; quote words with ' so they are checked")
	}
	allowed := map[string]bool{}
	for _, w := range words {
		allowed[w] = true
	}
	for _, m := range luaWord.FindAllStringSubmatch(code, -1) {
		w := m[1]
		if !allowed[w] && !redisWord.MatchString(w) && !strings.ContainsAny(w, "% ") && !punctOnly.MatchString(w) {
			bad("word '%s' is not a Go constant (status or field name)", w)
		}
	}
	return errs
}

// Words returns the single-quoted words of the script's code (comments
// left out), for tests that check a constant is used somewhere.
func (s *Script) Words() []string {
	var out []string
	for _, m := range luaWord.FindAllStringSubmatch(luaComment.ReplaceAllString(s.src, ""), -1) {
		out = append(out, m[1])
	}
	return out
}

func splitList(s string) []string {
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"redpacket/internal/apikey"
	"redpacket/internal/httpapi"
	"redpacket/internal/idempotency"
	"redpacket/internal/pgstore"
	"redpacket/internal/testenv/stack"
)

const idemBody = `{"sender_id":"sender-1","total_cents":1000,"count":4,"expires_in_seconds":600}`

func (c client) createKeyed(key, body string) answer {
	c.t.Helper()
	return c.doHeaders(http.MethodPost, "/v1/envelopes", body, map[string]string{"Idempotency-Key": key})
}

func replayed(a answer) bool { return a.Header.Get("Idempotent-Replayed") == "true" }

// A repeat answers the first answer byte for byte and creates nothing;
// another body with the key is refused; another key creates anew.
func TestIdempotentCreateReplays(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	first := c.createKeyed("order-42", idemBody)
	if first.Status != http.StatusCreated || replayed(first) {
		t.Fatalf("first create: %s, replayed=%v; want 201 not replayed", first, replayed(first))
	}
	var env createResponse
	requireJSON(t, first, &env)
	rows := envelopeRows(t, s)
	c.grab(env.EnvelopeID, "u-1") // the envelope changes; the replay does not
	for range 3 {
		again := c.createKeyed("order-42", idemBody)
		if again.Status != first.Status || !bytes.Equal(again.Body, first.Body) || !replayed(again) {
			t.Fatalf("repeat: %s (replayed=%v), want %s replayed", again, replayed(again), first)
		}
		if ct := again.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("repeat's Content-Type %q", ct)
		}
	}
	if n := envelopeRows(t, s); n != rows {
		t.Errorf("%d envelopes after repeats, want %d", n, rows)
	}
	other := strings.Replace(idemBody, `"count":4`, `"count":5`, 1)
	requireError(t, c.createKeyed("order-42", other), http.StatusUnprocessableEntity, "idempotency_mismatch")
	// The same request spelled otherwise is another body.
	requireError(t, c.createKeyed("order-42", idemBody+" "), http.StatusUnprocessableEntity, "idempotency_mismatch")
	if a := c.createKeyed("order-43", idemBody); a.Status != http.StatusCreated || bytes.Equal(a.Body, first.Body) || replayed(a) {
		t.Errorf("another key: %s replayed=%v, want a new envelope", a, replayed(a))
	}
	if n := envelopeRows(t, s); n != rows+1 {
		t.Errorf("%d envelopes, want %d", n, rows+1)
	}
}

// A key that is empty, too long, sent twice or not visible ASCII is 400 and
// creates nothing; a refused create is not remembered.
func TestIdempotencyKeyInvalid(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	for _, key := range []string{"", strings.Repeat("k", 256), "two words", "caf\u00e9", "tab\tkey"} {
		requireError(t, c.createKeyed(key, idemBody), http.StatusBadRequest, "invalid_argument")
	}
	req := func() answer {
		r, _ := http.NewRequest(http.MethodPost, "/v1/envelopes", strings.NewReader(idemBody))
		r.Header.Add("Idempotency-Key", "a")
		r.Header.Add("Idempotency-Key", "a")
		return serve(t, c.h, r)
	}
	requireError(t, req(), http.StatusBadRequest, "invalid_argument")
	if n := envelopeRows(t, s); n != 0 {
		t.Errorf("%d envelopes after refused keys, want 0", n)
	}
	if a := c.createKeyed(strings.Repeat("~", 255), idemBody); a.Status != http.StatusCreated {
		t.Errorf("255 visible characters: %s", a)
	}
	bad := strings.Replace(idemBody, `"count":4`, `"count":0`, 1)
	requireError(t, c.createKeyed("k-bad", bad), http.StatusBadRequest, "invalid_argument")
	if a := c.createKeyed("k-bad", idemBody); a.Status != http.StatusCreated || replayed(a) {
		t.Errorf("a key whose create was refused, used again: %s", a)
	}
}

// A key is forgotten after IDEMPOTENCY_TTL: the same request creates anew.
func TestIdempotencyKeyExpires(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	first := c.createKeyed("k", idemBody)
	s.Clock.Advance(idempotency.DefaultTTL - time.Millisecond)
	if a := c.createKeyed("k", idemBody); !replayed(a) || !bytes.Equal(a.Body, first.Body) {
		t.Fatalf("within the time to live: %s, want the replay", a)
	}
	s.Clock.Advance(time.Millisecond)
	a := c.createKeyed("k", idemBody)
	if a.Status != http.StatusCreated || replayed(a) || bytes.Equal(a.Body, first.Body) {
		t.Fatalf("after the time to live: %s, want a new envelope", a)
	}
	if n := envelopeRows(t, s); n != 2 {
		t.Errorf("%d envelopes, want 2", n)
	}
	// The next keyed create deletes the expired keys it finds.
	s.Clock.Advance(idempotency.DefaultTTL)
	c.createKeyed("k2", idemBody)
	var n int
	if err := s.Pool.QueryRow(t.Context(), "SELECT count(*) FROM idempotency_keys").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d keys stored, want 1 (the expired one deleted)", n)
	}
}

// Any number of concurrent requests with one key create one envelope; each
// answers its bytes or that the first is still in progress.
func TestIdempotentCreateConcurrent(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	const n = 12
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { answers[i] = c.createKeyed("same", idemBody) })
	}
	wg.Wait()
	if rows := envelopeRows(t, s); rows != 1 {
		t.Fatalf("%d envelopes from %d concurrent creates with one key, want 1", rows, n)
	}
	var body []byte
	fresh := 0
	for _, a := range answers {
		switch a.Status {
		case http.StatusCreated:
			if body != nil && !bytes.Equal(a.Body, body) {
				t.Errorf("two answers: %s and %s", a.Body, body)
			}
			body = a.Body
			if !replayed(a) {
				fresh++
			}
		case http.StatusConflict:
			requireError(t, a, http.StatusConflict, "idempotency_in_progress")
		default:
			t.Errorf("concurrent create: %s", a)
		}
	}
	if fresh != 1 {
		t.Errorf("%d answers not marked replayed, want 1", fresh)
	}
	if a := c.createKeyed("same", idemBody); !replayed(a) || (body != nil && !bytes.Equal(a.Body, body)) {
		t.Errorf("afterwards: %s, want the replay of %s", a, body)
	}
}

// While the first create of a key has not opened its envelope, a repeat is
// 409; once it is open, the repeat is answered from the envelope even if the
// first never recorded its answer.
func TestIdempotentCreateInProgress(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	now := s.Clock.Now().UTC().Truncate(time.Millisecond)
	code := "26112399901"
	e := pgstore.Envelope{ID: 777, Shard: 777 % stack.Shards, ShareCode: &code, SenderID: "sender-1", TotalCents: 1000,
		Count: 4, CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute)}
	key := &pgstore.IdempotencyKey{Key: "slow", RequestSHA256: idempotency.Fingerprint([]byte(idemBody)),
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if err := s.PG.InsertEnvelopeFor(t.Context(), e, pgstore.NewEnvelope{FirstPacketID: 7000,
		Amounts: []int64{250, 250, 250, 250}, Key: key}); err != nil {
		t.Fatal(err)
	}
	requireError(t, c.createKeyed("slow", idemBody), http.StatusConflict, "idempotency_in_progress")
	other := strings.Replace(idemBody, `"count":4`, `"count":5`, 1)
	requireError(t, c.createKeyed("slow", other), http.StatusUnprocessableEntity, "idempotency_mismatch")
	if err := s.PG.InsertEnvelopeFor(t.Context(), pgstore.Envelope{ID: 778, SenderID: "x", TotalCents: 1, Count: 1,
		CreatedAt: now, ExpiresAt: now.Add(time.Minute)}, pgstore.NewEnvelope{FirstPacketID: 8000, Amounts: []int64{1}, Key: key}); err == nil {
		t.Error("a second envelope with a live key was written")
	}
	if _, err := s.PG.MarkLoaded(t.Context(), e.ID); err != nil {
		t.Fatal(err)
	}
	a := c.createKeyed("slow", idemBody)
	var got createResponse
	requireJSON(t, a, &got)
	if a.Status != http.StatusCreated || !replayed(a) || got.EnvelopeID != e.ID || got.ShareCode != code || got.Status != "open" {
		t.Fatalf("after the envelope opened: %s replayed=%v", a, replayed(a))
	}
	if b := c.createKeyed("slow", idemBody); !bytes.Equal(b.Body, a.Body) {
		t.Errorf("second repeat %s differs from %s", b, a)
	}
}

// With API keys, idempotency keys are the client's own: two clients using
// one key create two envelopes, each replayed to its own client only.
func TestIdempotencyKeysPerClient(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	keyA, keyB := makeKey(t, s, "campaign-a", apikey.Scopes(apikey.ScopeCreate)), makeKey(t, s, "campaign-b", apikey.Scopes(apikey.ScopeCreate))
	api := newKeysAPI(t, s, time.Hour, httpapi.Options{})
	a, b := client{t: t, h: api, token: keyA}, client{t: t, h: api, token: keyB}
	fa, fb := a.createKeyed("k", idemBody), b.createKeyed("k", idemBody)
	if fa.Status != http.StatusCreated || fb.Status != http.StatusCreated || replayed(fb) || bytes.Equal(fa.Body, fb.Body) {
		t.Fatalf("one key, two clients: %s and %s (second replayed=%v)", fa, fb, replayed(fb))
	}
	if ra := a.createKeyed("k", idemBody); !replayed(ra) || !bytes.Equal(ra.Body, fa.Body) {
		t.Errorf("client a's repeat: %s, want %s", ra, fa)
	}
	if n := envelopeRows(t, s); n != 2 {
		t.Errorf("%d envelopes, want 2", n)
	}
}

// A rotated key belongs to the same client: a create whose answer was lost
// and is retried with the new key is answered with the first envelope, not
// made again.
func TestIdempotencyKeysSurviveRotation(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	old := makeKey(t, s, "shop", apikey.Scopes(apikey.ScopeCreate))
	rotated, err := apikey.Create(t.Context(), s.Pool, "shop-2026-12", "shop", apikey.Scopes(apikey.ScopeCreate))
	if err != nil {
		t.Fatal(err)
	}
	api := newKeysAPI(t, s, time.Hour, httpapi.Options{})
	first := client{t: t, h: api, token: old}.createKeyed("order-42", idemBody)
	retry := client{t: t, h: api, token: rotated}.createKeyed("order-42", idemBody)
	if first.Status != http.StatusCreated || !replayed(retry) || !bytes.Equal(retry.Body, first.Body) {
		t.Errorf("retried with the rotated key: %s (replayed=%v), want %s replayed", retry, replayed(retry), first)
	}
	if n := envelopeRows(t, s); n != 1 {
		t.Errorf("%d envelopes, want 1", n)
	}
}

// serve sends r to h as it is.
func serve(t *testing.T, h http.Handler, r *http.Request) answer {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	res := rec.Result()
	b, _ := io.ReadAll(res.Body)
	return answer{Status: res.StatusCode, Header: res.Header, Body: b}
}

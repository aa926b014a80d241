package pgstore_test

import (
	"regexp"
	"slices"
	"testing"

	"redpacket/internal/envelope"
	"redpacket/internal/testenv"
)

// TestDomainsMatchGoTypes ties the values PostgreSQL allows for the domains
// envelope_status and event_type to the Go constants of envelope.Status and
// envelope.EventType: each Go value is accepted, a value Go lacks is not, and
// the domain's constraint names exactly the Go values.
func TestDomainsMatchGoTypes(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	ctx := t.Context()
	value := regexp.MustCompile(`'([^']*)'::text`)
	for domain, want := range map[string][]string{
		"envelope_status": texts(envelope.Statuses()),
		"event_type":      texts(envelope.EventTypes()),
		"envelope_kind":   texts(envelope.Kinds()),
	} {
		var def string
		if err := pool.QueryRow(ctx, `SELECT pg_get_constraintdef(oid) FROM pg_constraint
			WHERE contypid = $1::regtype`, domain).Scan(&def); err != nil {
			t.Fatalf("%s: %v", domain, err)
		}
		var got []string
		for _, m := range value.FindAllStringSubmatch(def, -1) {
			got = append(got, m[1])
		}
		slices.Sort(got)
		if wantSorted := slices.Sorted(slices.Values(want)); !slices.Equal(got, wantSorted) {
			t.Errorf("domain %s allows %v, the Go constants are %v", domain, got, wantSorted)
		}
		for _, v := range want {
			if _, err := pool.Exec(ctx, `SELECT $1::text::`+domain, v); err != nil {
				t.Errorf("%s refuses %q: %v", domain, v, err)
			}
		}
		_, err := pool.Exec(ctx, `SELECT 'bogus'::text::`+domain)
		if !hasSQLState(err, "23514") {
			t.Errorf("%s accepts a value Go does not know: %v", domain, err)
		}
	}
}

func texts[T ~string](v []T) []string {
	out := make([]string, len(v))
	for i, s := range v {
		out[i] = string(s)
	}
	return out
}

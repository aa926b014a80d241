package events_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/events"
	"redpacket/internal/pgstore"
)

// A database whose idle_in_transaction_session_timeout is shorter than the
// receiver takes to answer: each event is still sent once and recorded
// delivered (the delivery's transaction, idle while the request is in
// flight, sets its own limit from WEBHOOK_TIMEOUT), not sent again and
// again with its acceptance never recorded.
func TestWebhookOutlastsTheDatabasesIdleTransactionLimit(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.openEnvelope(t, 1, 4)
	d.claimPackets(t, 1, 0, 2)
	u, err := url.Parse(d.url)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	if _, err := d.pool.Exec(t.Context(), `ALTER DATABASE "`+name+`" SET idle_in_transaction_session_timeout = '500ms'`); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(t.Context(), d.url) // sessions with the database's limit
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rc, srvURL := newReceiver(t, func(events.Message, int) int {
		time.Sleep(1200 * time.Millisecond)
		return 200
	})
	limited := db{Store: pgstore.New(pool), pool: pool, url: d.url}
	stop := runWebhook(t, limited, nil, events.WebhookConfig{URL: srvURL, Timeout: 5 * time.Second,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second, Workers: 2, Poll: 100 * time.Millisecond})
	ids := d.eventIDsByEnvelope(t)[1]
	for deadline := time.Now().Add(30 * time.Second); d.undelivered(t) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events not recorded delivered in 30 s", d.undelivered(t), len(ids))
		}
	}
	stop()
	for _, id := range ids {
		if n := rc.tries(id); n != 1 {
			t.Errorf("event %d sent %d times, want once", id, n)
		}
	}
}

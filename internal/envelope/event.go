package envelope

// EventType is the type of an event: a durable fact about an envelope or one
// of its packets that the campaign backend acts on (GET /v1/events and the
// webhooks). It is the type of the PostgreSQL domain event_type, which allows
// exactly the values below.
type EventType string

// The event types. The strings are stored and sent to the backend, so they
// must not change; a new one is added to EventTypes and to the domain
// event_type in a migration.
const (
	EventPacketClaimed     EventType = "packet.claimed"
	EventEnvelopeSoldOut   EventType = "envelope.sold_out"
	EventEnvelopeSettled   EventType = "envelope.settled"
	EventEnvelopeSuspended EventType = "envelope.suspended"
	EventEnvelopeRecovered EventType = "envelope.recovered"
)

// EventTypes lists every event type.
func EventTypes() []EventType {
	return []EventType{EventPacketClaimed, EventEnvelopeSoldOut, EventEnvelopeSettled,
		EventEnvelopeSuspended, EventEnvelopeRecovered}
}

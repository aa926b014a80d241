// Package envelope is the pure domain logic of a red packet (红包): the
// envelope states and the types of events about them, the create-request
// validation rules (and the characters of a user id) and the splitting of an
// envelope's money into packets. It does no I/O.
//
// # Integer cents
//
// Money is always an int64 number of cents. Floating point cannot represent
// most decimal fractions exactly, so a float split could make the packets sum
// to one cent more or less than the sender paid; with integers the sum is
// exact by construction and the ledger always balances.
//
// # The double-mean rule
//
// An envelope is split ahead of time, when it is created, so a grab only has
// to pop a pre-computed amount. Packets are drawn one after another: with
// remaining cents left for n packets (this one included), the next amount is
// uniform on [1, 2*remaining/n), i.e. up to twice the current mean. That keeps
// the expected value of every packet at the mean while still giving a lucky
// grabber a much larger share, and it can never leave fewer cents than packets
// (every packet gets at least 1 cent). The last packet takes what is left.
// Because the last packets have a different spread from the first ones, the
// amounts are then shuffled, so the order of grabbing gives no advantage.
package envelope

import "errors"

// Status of an envelope: the one type of envelope statuses in the service,
// from the PostgreSQL domain envelope_status (which allows exactly these
// values) to the API.
type Status string

// The envelope states. The strings are the values stored in PostgreSQL, so
// they must not change; a new one is added to Statuses and to the domain
// envelope_status in a migration.
const (
	StatusLoading   Status = "loading"
	StatusOpen      Status = "open"
	StatusSoldOut   Status = "sold_out"
	StatusExpired   Status = "expired"
	StatusSettled   Status = "settled"
	StatusSuspended Status = "suspended"
	StatusFailed    Status = "failed" // creation never finished; nothing was offered, all refunded
)

// String returns the status as stored.
func (s Status) String() string { return string(s) }

// Statuses lists every envelope status.
func Statuses() []Status {
	return []Status{StatusLoading, StatusOpen, StatusSoldOut, StatusExpired, StatusSettled, StatusSuspended, StatusFailed}
}

// Kind is how an envelope's money is split: the type of the PostgreSQL
// domain envelope_kind, which allows exactly these values.
type Kind string

// The kinds. The strings are stored and answered, so they must not change.
const (
	KindRandom Kind = "random" // double-mean draws (the default)
	KindFixed  Kind = "fixed"  // every packet total_cents / count
)

// String returns the kind as stored.
func (k Kind) String() string { return string(k) }

// Kinds lists every kind.
func Kinds() []Kind { return []Kind{KindRandom, KindFixed} }

// ErrInvalid is wrapped by every validation error (errors.Is(err, ErrInvalid)).
var ErrInvalid = errors.New("invalid argument")

// FieldError is a validation error naming the offending JSON field, so the
// HTTP layer can report it to the client without parsing a message.
type FieldError struct {
	Field   string // JSON field name, e.g. "count"
	Problem string // short human sentence, e.g. "must be between 1 and 100000"
}

// Error returns "field: problem".
func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// Unwrap returns ErrInvalid, so callers can classify any validation error
// with errors.Is without knowing its field.
func (e *FieldError) Unwrap() error { return ErrInvalid }

package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"go.uber.org/zap"

	"redpacket/internal/apikey"
	"redpacket/internal/envelope"
	"redpacket/internal/events"
	"redpacket/internal/grab"
	"redpacket/internal/idempotency"
	"redpacket/internal/ids"
	"redpacket/internal/limits"
	"redpacket/internal/reqctx"
)

// apiError is an answer other than success: the HTTP status, the API's code
// and a message for a person.
type apiError struct {
	status  int
	code    errorCode
	message string
}

func (e *apiError) Error() string { return string(e.code) + ": " + e.message }

func badRequest(msg string) *apiError {
	return &apiError{http.StatusBadRequest, codeInvalidArgument, msg}
}

// The package's own refusals, before any handler's work: returned like any
// other error, so that toAPIError alone decides their status, code and text.
// errMethodNotAllowed and errBodyTooLarge end and begin the client's message,
// which the wrapping gives the method and the limit (methodNotAllowedErr,
// bodyTooLargeErr).
var (
	errUnauthenticated  = errors.New("missing or wrong bearer token")
	errNoRoute          = errors.New("no such route")
	errMethodNotAllowed = errors.New("is not allowed here")
	errFeedNotServed    = errors.New("the events feed is not served here")
	errBodyTooLarge     = errors.New("request body is larger than")
	// errPanicked is left to toAPIError's default (500 internal); the
	// panic's value and stack are logged where it is recovered.
	errPanicked = errors.New("panic serving request")
)

// methodNotAllowedErr is errMethodNotAllowed for method: "POST is not
// allowed here".
func methodNotAllowedErr(method string) error {
	return fmt.Errorf("%s %w", method, errMethodNotAllowed)
}

// bodyTooLargeErr is errBodyTooLarge for limit: "request body is larger
// than 65536 bytes".
func bodyTooLargeErr(limit int64) error {
	return fmt.Errorf("%w %d bytes", errBodyTooLarge, limit)
}

// refusal is toAPIError's answer to the package's own refusals, nil for
// any other error.
func refusal(err error) *apiError {
	switch {
	case errors.Is(err, errUnauthenticated):
		return &apiError{http.StatusUnauthorized, codeUnauthenticated, errUnauthenticated.Error()}
	case errors.Is(err, errNoRoute):
		return &apiError{http.StatusNotFound, codeNotFound, errNoRoute.Error()}
	case errors.Is(err, errMethodNotAllowed):
		return &apiError{http.StatusMethodNotAllowed, codeMethodNotAllowed, err.Error()}
	case errors.Is(err, errFeedNotServed):
		return &apiError{http.StatusServiceUnavailable, codeUnavailable, errFeedNotServed.Error()}
	case errors.Is(err, errBodyTooLarge):
		return badRequest(err.Error())
	}
	return nil
}

// toAPIError is the one place errors become API answers.
func toAPIError(err error) *apiError {
	if ae := refusal(err); ae != nil {
		return ae
	}
	var ae *apiError
	var fe *envelope.FieldError
	var notOpened *grab.NotOpenedError
	var givenUp *grab.GivenUpError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &fe):
		return badRequest(fe.Error())
	case errors.Is(err, envelope.ErrInvalid):
		return badRequest(err.Error())
	case errors.Is(err, idempotency.ErrInvalidKey):
		return badRequest(err.Error())
	case errors.Is(err, idempotency.ErrMismatch):
		return &apiError{http.StatusUnprocessableEntity, codeIdempotencyMismatch, err.Error()}
	case errors.Is(err, idempotency.ErrInProgress):
		return &apiError{http.StatusConflict, codeIdempotencyInProgress, err.Error()}
	case errors.Is(err, limits.ErrExceeded):
		return &apiError{http.StatusForbidden, codeLimitExceeded, err.Error()}
	case errors.As(err, new(*limits.RateLimitedError)):
		return &apiError{http.StatusTooManyRequests, codeRateLimited, err.Error()}
	case errors.Is(err, apikey.ErrInsufficientScope):
		return &apiError{http.StatusForbidden, codeInsufficientScope, err.Error()}
	case errors.Is(err, grab.ErrNotFound):
		return &apiError{http.StatusNotFound, codeNotFound, "no such envelope"}
	case errors.Is(err, grab.ErrSoldOut):
		return &apiError{http.StatusConflict, codeSoldOut, "no packet left"}
	case errors.Is(err, grab.ErrNotSettled):
		return &apiError{http.StatusConflict, codeNotSettled, "the split is shown once the envelope is settled"}
	case errors.Is(err, grab.ErrExpired):
		return &apiError{http.StatusConflict, codeExpired, "the envelope has expired"}
	case errors.Is(err, grab.ErrNotStarted):
		return &apiError{http.StatusConflict, codeNotStarted, "the envelope has not started yet"}
	case errors.Is(err, grab.ErrNotRecipient):
		return &apiError{http.StatusForbidden, codeNotRecipient, "this envelope is for other users"}
	case errors.Is(err, grab.ErrWrongPassword):
		return &apiError{http.StatusForbidden, codeWrongPassword, "the password is missing or wrong"}
	case errors.Is(err, ids.ErrExhausted):
		return &apiError{http.StatusServiceUnavailable, codeResourceExhausted, err.Error()}
	case errors.As(err, &notOpened):
		return &apiError{http.StatusServiceUnavailable, codeUnavailable, fmt.Sprintf(
			"envelope %d was written but is not open yet (its status tells when it opens, or if it is given up and refunded): do not create it again", notOpened.EnvelopeID)}
	case errors.As(err, &givenUp):
		// Retrying the key can only answer this again, for IDEMPOTENCY_TTL.
		return &apiError{http.StatusServiceUnavailable, codeUnavailable, fmt.Sprintf(
			"envelope %d of this Idempotency-Key was given up and refunded: create again with another key", givenUp.EnvelopeID)}
	case errors.Is(err, grab.ErrUnavailable), errors.Is(err, events.ErrUnavailable):
		return &apiError{http.StatusServiceUnavailable, codeUnavailable, "temporarily unavailable, retry later"}
	}
	return &apiError{http.StatusInternalServerError, codeInternal, "internal error"}
}

type errorBody struct {
	Error struct {
		Code    errorCode `json:"code"`
		Message string    `json:"message"`
	} `json:"error"`
}

// writeError answers with the API's error shape. Server-side failures are
// logged with the cause; the client sees only the code and a generic text.
// A request whose client went away (its context ended) is no server failure:
// logged at debug level only. A 503 is a condition that lasts (a dependency
// down): summarised at most once per unavailableLogEvery.
func (rt *router) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := toAPIError(err)
	status := ae.status
	switch {
	case ae.status >= 500 && r.Context().Err() != nil:
		rt.log.Debug("client went away before the answer", zap.String("method", r.Method),
			zap.String("path", r.URL.Path), zap.NamedError("cause", err))
		status = statusClientClosed
	case ae.status == http.StatusServiceUnavailable:
		fields := []zap.Field{zap.String("method", r.Method), zap.String("path", r.URL.Path),
			zap.String("code", string(ae.code)), zap.Error(err)}
		if info := reqctx.From(r.Context()); info != nil {
			fields = append(fields, zap.String("request_id", info.ID)) // of the latest one
		}
		rt.unavailable.Add(fields...)
	case ae.status >= 500:
		rt.log.Error("request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path),
			zap.Int("status", ae.status), zap.Error(err))
	}
	var rl *limits.RateLimitedError
	if errors.As(err, &rl) {
		w.Header().Set("Retry-After", strconv.FormatInt(rl.RetryAfterSeconds(), 10))
	}
	var body errorBody
	body.Error.Code, body.Error.Message = ae.code, ae.message
	writeJSON(w, status, body)
}

// statusClientClosed is what a request whose client went away is recorded
// as (nginx's "client closed request"; nobody reads the answer): in the
// access log and the request metrics a hang-up is then a 4xx, not one of
// the 5xx the server-error alert counts.
const statusClientClosed = 499

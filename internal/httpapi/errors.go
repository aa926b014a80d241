package httpapi

import (
	"errors"
	"net/http"

	"go.uber.org/zap"

	"redpacket/internal/apikey"
	"redpacket/internal/envelope"
	"redpacket/internal/events"
	"redpacket/internal/grab"
	"redpacket/internal/ids"
)

// apiError is an answer other than success: the HTTP status, the API's code
// and a message for a person.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func badRequest(msg string) *apiError {
	return &apiError{http.StatusBadRequest, "invalid_argument", msg}
}

// toAPIError is the one place errors become API answers.
func toAPIError(err error) *apiError {
	var ae *apiError
	var fe *envelope.FieldError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &fe):
		return badRequest(fe.Error())
	case errors.Is(err, envelope.ErrInvalid):
		return badRequest(err.Error())
	case errors.Is(err, apikey.ErrInsufficientScope):
		return &apiError{http.StatusForbidden, "insufficient_scope", err.Error()}
	case errors.Is(err, grab.ErrNotFound):
		return &apiError{http.StatusNotFound, "not_found", "no such envelope"}
	case errors.Is(err, grab.ErrSoldOut):
		return &apiError{http.StatusConflict, "sold_out", "no packet left"}
	case errors.Is(err, grab.ErrNotSettled):
		return &apiError{http.StatusConflict, "not_settled", "the split is shown once the envelope is settled"}
	case errors.Is(err, grab.ErrExpired):
		return &apiError{http.StatusConflict, "expired", "the envelope has expired"}
	case errors.Is(err, ids.ErrExhausted):
		return &apiError{http.StatusServiceUnavailable, "resource_exhausted", err.Error()}
	case errors.Is(err, grab.ErrUnavailable), errors.Is(err, events.ErrUnavailable):
		return &apiError{http.StatusServiceUnavailable, "unavailable", "temporarily unavailable, retry later"}
	}
	return &apiError{http.StatusInternalServerError, "internal", "internal error"}
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeError answers with the API's error shape. Server-side failures are
// logged with the cause; the client sees only the code and a generic text.
// A request whose client went away (its context ended) is no server failure:
// logged at debug level only.
func (rt *router) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ae := toAPIError(err)
	switch {
	case ae.status >= 500 && r.Context().Err() != nil:
		rt.log.Debug("client went away before the answer", zap.String("method", r.Method),
			zap.String("path", r.URL.Path), zap.NamedError("cause", err))
	case ae.status >= 500:
		rt.log.Error("request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path),
			zap.Int("status", ae.status), zap.Error(err))
	}
	var body errorBody
	body.Error.Code, body.Error.Message = ae.code, ae.message
	writeJSON(w, ae.status, body)
}

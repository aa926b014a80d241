package httpapi

// errorCode is the API's code of an error answer, as a client reads it in
// {"error": {"code": ...}}: typed, so that answers name the constants below,
// the codes the API documents (docs/api.md, ErrorCode in docs/openapi.yaml),
// rather than strings of their own.
type errorCode string

// The error codes the API documents, and no other.
const (
	codeInvalidArgument       errorCode = "invalid_argument"
	codeUnauthenticated       errorCode = "unauthenticated"
	codeInsufficientScope     errorCode = "insufficient_scope"
	codeNotRecipient          errorCode = "not_recipient"
	codeWrongPassword         errorCode = "wrong_password"
	codeLimitExceeded         errorCode = "limit_exceeded"
	codeNotFound              errorCode = "not_found"
	codeMethodNotAllowed      errorCode = "method_not_allowed"
	codeSoldOut               errorCode = "sold_out"
	codeExpired               errorCode = "expired"
	codeNotStarted            errorCode = "not_started"
	codeNotSettled            errorCode = "not_settled"
	codeIdempotencyInProgress errorCode = "idempotency_in_progress"
	codeIdempotencyMismatch   errorCode = "idempotency_mismatch"
	codeRateLimited           errorCode = "rate_limited"
	codeInternal              errorCode = "internal"
	codeUnavailable           errorCode = "unavailable"
	codeResourceExhausted     errorCode = "resource_exhausted"
)

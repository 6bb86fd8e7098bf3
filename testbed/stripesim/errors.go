package stripesim

import (
	"fmt"
	"net/http"
)

// Stripe error types (the "type" field of an error object).
const (
	typeInvalidRequest = "invalid_request_error"
	typeIdempotency    = "idempotency_error"
	typeAPI            = "api_error"
)

// apiError is a Stripe error object. It is rendered as {"error": {...}}, which
// is what stripe-go's ResponseToError decodes into *stripe.Error.
type apiError struct {
	status  int
	Type    string `json:"type"`
	Code    string `json:"code,omitempty"`
	Param   string `json:"param,omitempty"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Message }

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, struct {
		Error *apiError `json:"error"`
	}{e})
}

func invalidRequest(status int, code, param, format string, args ...any) *apiError {
	return &apiError{
		status:  status,
		Type:    typeInvalidRequest,
		Code:    code,
		Param:   param,
		Message: fmt.Sprintf(format, args...),
	}
}

func errParamMissing(param string) *apiError {
	return invalidRequest(http.StatusBadRequest, "parameter_missing", param, "Missing required param: %s.", param)
}

func errParamUnknown(param string) *apiError {
	return invalidRequest(http.StatusBadRequest, "parameter_unknown", param, "Received unknown parameter: %s", param)
}

func errParamEmpty(param string) *apiError {
	return invalidRequest(http.StatusBadRequest, "parameter_invalid_empty", param,
		"You passed an empty string for '%[1]s'. We assume empty values are an attempt to unset a parameter; "+
			"however '%[1]s' cannot be unset. You should remove '%[1]s' from your request or supply a non-empty value.", param)
}

func errInvalidInteger(param, value string) *apiError {
	return invalidRequest(http.StatusBadRequest, "parameter_invalid_integer", param, "Invalid integer: %s", value)
}

func errNoSuchTransfer(param, id string) *apiError {
	return invalidRequest(http.StatusNotFound, "resource_missing", param, "No such transfer: '%s'", id)
}

func errIdempotencyMismatch(key string) *apiError {
	return &apiError{
		status: http.StatusBadRequest,
		Type:   typeIdempotency,
		Message: fmt.Sprintf("Keys for idempotent requests can only be used with the same parameters they were first used with. "+
			"Try using a key other than '%s' if you meant to execute a different request.", key),
	}
}

func errIdempotencyKeyInUse(key string) *apiError {
	return invalidRequest(http.StatusConflict, "idempotency_key_in_use", "",
		"There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, "+
			"and the other request is still going through): %s. Please try again later.", key)
}

func errInternal(format string, args ...any) *apiError {
	return &apiError{status: http.StatusInternalServerError, Type: typeAPI, Message: fmt.Sprintf(format, args...)}
}

// errBodyTooLarge refuses a body over the limit as a whole; it is never
// truncated.
func errBodyTooLarge(limit int64) *apiError {
	return invalidRequest(http.StatusRequestEntityTooLarge, "", "",
		"Request body too large: the limit is %d bytes.", limit)
}

// errShuttingDown answers a request whose slow fault was cut short by
// Server.BeginShutdown; the request was not processed.
func errShuttingDown(rule FaultRule) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, Type: typeAPI, Message: fmt.Sprintf(
		"The simulator is shutting down: this request was not processed (stripesim fault %q, rule %d, was cut short). "+
			"Please try again.", rule.Fault, rule.ID)}
}

func errUnrecognizedURL(r *http.Request) *apiError {
	return invalidRequest(http.StatusNotFound, "", "",
		"Unrecognized request URL (%s: %s). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.",
		r.Method, r.URL.Path)
}

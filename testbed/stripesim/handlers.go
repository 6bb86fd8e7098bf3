package stripesim

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// createTransfer implements POST /v1/transfers with Stripe's idempotency
// semantics layered in front of validation and execution.
func (s *Server) createTransfer(w http.ResponseWriter, r *http.Request) {
	params, aerr := readForm(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	key := strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	if len(key) > maxIdempotencyKeyLen {
		writeError(w, invalidRequest(http.StatusBadRequest, "", "",
			"Keys for idempotent requests can only be up to %d characters long.", maxIdempotencyKeyLen))
		return
	}
	in, verr := parseTransferInput(params)
	if key == "" {
		// No key: no idempotency, exactly like Stripe.
		if verr != nil {
			writeError(w, verr)
			return
		}
		s.executeCreate(w, r, in, "", "")
		return
	}
	w.Header().Set("Idempotency-Key", key)

	now := s.now()
	res, err := s.store.reserve(r.Context(), reservation{
		Key:             key,
		Method:          r.Method,
		Path:            r.URL.Path,
		Fingerprint:     fingerprint(r.Method, r.URL.Path, params),
		Invalid:         verr != nil,
		Now:             now,
		ExpiresBefore:   now.Add(-s.cfg.KeyTTL),
		AbandonedBefore: now.Add(-s.cfg.InFlightTimeout),
	})
	if err != nil {
		writeError(w, s.internalError(r, "reserve idempotency key", err))
		return
	}
	switch res.Outcome {
	case outcomeReplay:
		writeReplay(w, res)
	case outcomeMismatch:
		writeError(w, errIdempotencyMismatch(key))
	case outcomeInUse:
		writeError(w, errIdempotencyKeyInUse(key))
	case outcomeFree:
		writeError(w, verr)
	case outcomeReserved:
		s.executeCreate(w, r, in, key, res.Token)
	}
}

func writeReplay(w http.ResponseWriter, res reserveResult) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Idempotent-Replayed", "true")
	if res.OriginalRequestID != "" {
		h.Set("Original-Request", res.OriginalRequestID)
	}
	w.WriteHeader(res.Status)
	w.Write(res.Body)
}

// executeCreate runs the BeforeCommit hook and commits the transfer together
// with the key's saved response. If anything fails before the commit, the
// reservation is released (before the error is written, so a client that
// retries immediately finds the key free) and a retry with the same key can
// succeed.
func (s *Server) executeCreate(w http.ResponseWriter, r *http.Request, in transferInput, key, token string) {
	// The client going away must not strand a reservation or half-finish the
	// work: like Stripe, once execution starts it runs to completion.
	ctx := context.WithoutCancel(r.Context())
	settled := token == ""
	release := func() {
		if !settled {
			settled = true
			s.releaseKey(ctx, key, token)
		}
	}
	defer release() // a panicking hook must not wedge the key either
	fail := func(e *apiError) {
		release()
		writeError(w, e)
	}

	if hook := s.hooks.Load().BeforeCommit; hook != nil {
		if err := hook(r, key); err != nil {
			s.log.Warn("BeforeCommit hook failed", "idempotency_key", key, "err", err)
			fail(errInternal("An error occurred while processing your request: %v", err))
			return
		}
	}

	t := newTransfer(in, s.now())
	body, err := marshalJSON(t)
	if err != nil {
		fail(s.internalError(r, "encode transfer", err))
		return
	}
	var c *claim
	if token != "" {
		c = &claim{Key: key, Token: token, Status: http.StatusOK, Body: body, RequestID: w.Header().Get("Request-Id")}
	}
	switch err := s.store.commitTransfer(ctx, t, c); {
	case errors.Is(err, errClaimLost):
		settled = true // the key belongs to another request now
		writeError(w, errIdempotencyKeyInUse(key))
		return
	case err != nil:
		fail(s.internalError(r, "commit transfer", err))
		return
	}
	settled = true
	writeRaw(w, http.StatusOK, body)
}

func (s *Server) releaseKey(ctx context.Context, key, token string) {
	if err := s.store.release(ctx, key, token); err != nil {
		// The row stays in_flight and is reclaimed after InFlightTimeout.
		s.log.Error("release idempotency key", "idempotency_key", key, "err", err)
	}
}

// getTransfer implements GET /v1/transfers/{id}.
func (s *Server) getTransfer(w http.ResponseWriter, r *http.Request) {
	if aerr := onlyExpand(r.URL.Query()); aerr != nil {
		writeError(w, aerr)
		return
	}
	id := r.PathValue("id")
	t, err := s.store.getTransfer(r.Context(), id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		writeError(w, errNoSuchTransfer("id", id))
	case err != nil:
		writeError(w, s.internalError(r, "get transfer", err))
	default:
		writeJSON(w, http.StatusOK, t)
	}
}

func onlyExpand(q url.Values) *apiError {
	for _, k := range sortedKeys(q) {
		if !isExpand(k) {
			return errParamUnknown(k)
		}
	}
	return nil
}

// listTransfers implements GET /v1/transfers.
func (s *Server) listTransfers(w http.ResponseWriter, r *http.Request) {
	q, aerr := parseListQuery(r.URL.Query())
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	page, hasMore, err := s.store.listTransfers(r.Context(), q)
	switch {
	case errors.Is(err, errCursorNotFound):
		param, id := "starting_after", q.StartingAfter
		if q.EndingBefore != "" {
			param, id = "ending_before", q.EndingBefore
		}
		writeError(w, invalidRequest(http.StatusBadRequest, "resource_missing", param, "No such transfer: '%s'", id))
	case err != nil:
		writeError(w, s.internalError(r, "list transfers", err))
	default:
		if page == nil {
			page = []*transfer{}
		}
		writeJSON(w, http.StatusOK, transferList{Object: "list", Data: page, HasMore: hasMore, URL: "/v1/transfers"})
	}
}

var createdOps = map[string]string{"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}

func parseListQuery(v url.Values) (listQuery, *apiError) {
	q := listQuery{Limit: 10}
	for _, k := range sortedKeys(v) {
		val, _ := last(v, k)
		if err := applyListParam(&q, k, val); err != nil {
			return q, err
		}
	}
	if q.StartingAfter != "" && q.EndingBefore != "" {
		return q, invalidRequest(http.StatusBadRequest, "parameters_exclusive", "ending_before",
			"You may only specify one of these parameters: ending_before, starting_after.")
	}
	return q, nil
}

func applyListParam(q *listQuery, k, val string) *apiError {
	switch {
	case k == "limit":
		n, err := strconv.Atoi(val)
		if err != nil {
			return errInvalidInteger(k, val)
		}
		if n < 1 || n > 100 {
			return invalidRequest(http.StatusBadRequest, "parameter_invalid_integer", k,
				"This value must be greater than or equal to 1 and less than or equal to 100.")
		}
		q.Limit = n
	case k == "starting_after":
		q.StartingAfter = val
	case k == "ending_before":
		q.EndingBefore = val
	case k == "transfer_group":
		q.TransferGroup = &val
	case k == "destination":
		q.Destination = &val
	case k == "created":
		return addCreatedBound(q, k, "=", val)
	case isExpand(k):
	default:
		op, ok := bracketed(k, "created")
		if sqlOp := createdOps[op]; ok && sqlOp != "" {
			return addCreatedBound(q, k, sqlOp, val)
		}
		return errParamUnknown(k)
	}
	return nil
}

func addCreatedBound(q *listQuery, param, op, val string) *apiError {
	n, err := strconv.ParseInt(val, 10, 64)
	if err != nil {
		return errInvalidInteger(param, val)
	}
	q.Created = append(q.Created, createdBound{Op: op, Value: n})
	return nil
}

package httpapi

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
)

// auditAPI is what the verification and export handlers need besides the
// store.
type auditAPI struct {
	keys []ed25519.PublicKey // the keys stored checkpoints must be signed with, oldest first
	// verifying admits one verification at a time per instance: a walk
	// keeps a connection and a CPU busy for as long as the chain is long.
	verifying chan struct{}
}

func newAuditAPI(keys []ed25519.PublicKey) auditAPI {
	return auditAPI{keys: keys, verifying: make(chan struct{}, 1)}
}

// VerifyChain walks the chain against the stored checkpoints, one walk at
// a time per instance (the console's "verify" page uses it too): from its
// start (from 0), or after the stored checkpoint at seq from, for a chain
// whose older events were archived (invalid when there is none); and
// against the checkpoints kept elsewhere in external.
func (s *Server) VerifyChain(ctx context.Context, from int64, external ...audit.Checkpoint) (audit.Report, error) {
	var anchor *audit.Checkpoint
	if from != 0 {
		cp, ok, err := s.store.CheckpointAt(ctx, from)
		if err != nil {
			return audit.Report{}, err
		}
		if !ok {
			return audit.Report{}, apperr.Invalid("from: there is no stored checkpoint at seq %d (GET /api/v1/audit/checkpoints lists them)", from)
		}
		anchor = &cp
	}
	select {
	case s.audit.verifying <- struct{}{}:
		defer func() { <-s.audit.verifying }()
	case <-ctx.Done():
		return audit.Report{}, ctx.Err()
	}
	return audit.Verify(ctx, s.store, audit.VerifyOptions{Keys: s.audit.keys, External: external, From: anchor})
}

// AuditKeys returns the keys stored checkpoints may be signed with: those
// the audit key replaced, oldest first, then the audit key.
func (s *Server) AuditKeys() []ed25519.PublicKey { return slices.Clone(s.audit.keys) }

// ParseVerifyFrom reads a verification's from parameter: the seq of a
// stored checkpoint, a positive integer.
func ParseVerifyFrom(v string) (int64, error) {
	seq, err := strconv.ParseInt(v, 10, 64)
	if err != nil || seq < 1 {
		return 0, apperr.Invalid("from must be the seq of a stored checkpoint (a positive integer)")
	}
	return seq, nil
}

// verifyAudit walks the chain (GET /api/v1/audit/verify). Each
// ?checkpoint= (repeatable) is a checkpoint kept elsewhere, as exported by
// /api/v1/audit/checkpoints: its JSON object, or that JSON in base64.
// ?from=SEQ starts the walk after the stored checkpoint at SEQ, for a
// chain whose older events were archived. The answer is 200 whatever the
// verdict: {ok, checked, head, from?, first_bad_seq?, reason?}.
func (s *Server) verifyAudit(w http.ResponseWriter, r *http.Request) {
	q, err := queryValues(r, []string{"from"}, "checkpoint")
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var external []audit.Checkpoint
	for _, v := range q["checkpoint"] {
		cp, err := audit.ParseCheckpoint(v)
		if err != nil {
			writeError(w, r, s.log, apperr.Invalid("checkpoint: %v", err))
			return
		}
		external = append(external, cp)
	}
	var from int64
	if q.Has("from") {
		var err error
		if from, err = ParseVerifyFrom(q.Get("from")); err != nil {
			writeError(w, r, s.log, err)
			return
		}
	}
	// A long chain takes longer than the server's write timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	report, err := s.VerifyChain(r.Context(), from, external...)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, report)
}

// exportAudit streams the events matching the audit query's filters as
// NDJSON, one audit.Record per line (GET /api/v1/audit/export). cursor
// starts after an id (or a seq), limit (optional, any size) stops early, and
// order=seq exports sealed events in chain order: unfiltered, that is the
// whole chain, which `auditctl verify -offline` checks without the server.
func (s *Server) exportAudit(w http.ResponseWriter, r *http.Request) {
	q, err := queryValues(r, append([]string{"order"}, auditFilterParams...))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, r, s.log, apperr.Invalid("limit must be a positive integer"))
			return
		}
		limit = n
		q.Del("limit") // the query's page size bound does not apply
	}
	bySeq := false
	switch q.Get("order") {
	case "", "id":
	case "seq":
		bySeq = true
	default:
		writeError(w, r, s.log, apperr.Invalid("order must be id or seq"))
		return
	}
	q.Del("order")
	f, err := parseAuditFilter(q)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	f.Limit = limit
	streamNDJSON(w, r, s, func(emit func(any) error) error {
		return s.store.ExportEvents(r.Context(), f, bySeq, func(rec *audit.Record) error { return emit(rec) })
	})
}

// auditCheckpoints streams the stored checkpoints as NDJSON, oldest first
// (GET /api/v1/audit/checkpoints[?after=<seq>]). Keep the lines somewhere
// the database's administrators cannot write.
func (s *Server) auditCheckpoints(w http.ResponseWriter, r *http.Request) {
	q, err := queryValues(r, []string{"after"})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var after int64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, r, s.log, apperr.Invalid("after must be a sequence number"))
			return
		}
		after = n
	}
	streamNDJSON(w, r, s, func(emit func(any) error) error {
		const page = 1000
		for {
			cps, err := s.store.CheckpointPage(r.Context(), after, page)
			if err != nil {
				return err
			}
			for i := range cps {
				if err := emit(&cps[i]); err != nil {
					return err
				}
			}
			if len(cps) < page {
				return nil
			}
			after = cps[len(cps)-1].Seq
		}
	})
}

// streamNDJSON answers 200 with one JSON value per line from produce,
// flushing as it goes; memory stays at what produce holds. An error before
// the first line is an ordinary error answer; after it, the connection is
// cut, so that the client sees a failed transfer rather than a short export.
func streamNDJSON(w http.ResponseWriter, r *http.Request, s *Server, produce func(emit func(any) error) error) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // an export may take longer than the write timeout
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	n := 0
	start := func() {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
	}
	err := produce(func(v any) error {
		if n == 0 {
			start()
		}
		n++
		if err := enc.Encode(v); err != nil {
			return err
		}
		if n%500 == 0 {
			return rc.Flush()
		}
		return nil
	})
	switch {
	case err != nil && n == 0:
		writeError(w, r, s.log, err)
	case err != nil:
		if r.Context().Err() == nil {
			s.log.ErrorContext(r.Context(), "audit stream failed", "path", r.URL.Path, "lines", n, "err", err)
		}
		panic(http.ErrAbortHandler)
	case n == 0:
		start()
	default:
		_ = rc.Flush()
	}
}

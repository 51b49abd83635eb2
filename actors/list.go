package actors

import (
	"bytes"
	"errors"
	"fmt"

	"rtcd/actors/core"
	"rtcd/apierr"
	"rtcd/persistence"
)

// Pagination bounds (spec section 4, pagination rules).
const (
	PageLimitMin     = 1
	PageLimitMax     = 100
	PageLimitDefault = 50
)

// result is an actor's answer as the HTTP layer sees it.
func result(r core.Reply) (Result, *apierr.Error) {
	if r.Err != nil {
		return Result{}, r.Err
	}
	return Result{Status: r.Status, Body: r.Body, Replayed: r.Replayed}, nil
}

// listPage renders a page envelope of the newest limit entries under
// prefix. fetch maps an index value to its record; nil means the index value
// is the record. has_more is true only when an entry exists beyond the page.
func (e *Engine) listPage(prefix []byte, limit int, withCursor bool, fetch func(value []byte) ([]byte, error)) ([]byte, *apierr.Error) {
	var buf bytes.Buffer
	buf.WriteString(`{"object":"list","data":[`)
	n := 0
	hasMore := false
	var fetchErr error
	err := e.env.Store.Scan(prefix, limit+1, func(_, value []byte) bool {
		if n == limit {
			hasMore = true
			return false
		}
		record := value
		if fetch != nil {
			var err error
			if record, err = fetch(value); err != nil {
				fetchErr = err
				return false
			}
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.Write(record)
		n++
		return true
	})
	if err == nil {
		err = fetchErr
	}
	if errors.Is(err, persistence.ErrUnavailable) {
		e := apierr.New(apierr.ServiceUnavailable, "the store did not answer the list read; retry")
		e.RetryAfterSeconds = 1
		return nil, e
	}
	if err != nil {
		return nil, apierr.New(apierr.Internal, "could not read the list")
	}
	buf.WriteString(`],"page":{"has_more":`)
	fmt.Fprint(&buf, hasMore)
	if withCursor {
		buf.WriteString(`,"next_cursor":null`)
	}
	buf.WriteString(`}}`)
	return buf.Bytes(), nil
}

func notFoundOrInternal(err error, notFound *apierr.Error) *apierr.Error {
	if errors.Is(err, persistence.ErrNotFound) {
		return notFound
	}
	return apierr.New(apierr.Internal, "could not read the record")
}

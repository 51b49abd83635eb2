package payments

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// fetcherProvider is a Provider with a FetchReceiptURL that records the
// context it was given and answers url, err.
type fetcherProvider struct {
	Sandbox
	url      string
	err      error
	deadline time.Duration // left on the context's deadline when called
	hadLimit bool
}

func (f *fetcherProvider) Name() string { return "fake" }

func (f *fetcherProvider) FetchReceiptURL(ctx context.Context, ref string) (string, error) {
	if d, ok := ctx.Deadline(); ok {
		f.hadLimit, f.deadline = true, time.Until(d)
	}
	return f.url, f.err
}

func TestReceiptLookup(t *testing.T) {
	t.Run("none for a provider whose callbacks carry the receipt", func(t *testing.T) {
		if ReceiptLookup(&Sandbox{}) != nil {
			t.Fatal("the sandbox got a receipt lookup")
		}
	})

	t.Run("bounded by ReceiptFetchTimeout", func(t *testing.T) {
		f := &fetcherProvider{url: "https://receipts.example/1"}
		got, err := ReceiptLookup(f)(context.Background(), "cs_1")
		if err != nil || got != f.url {
			t.Fatalf("lookup = %q, %v", got, err)
		}
		if !f.hadLimit || f.deadline > ReceiptFetchTimeout || f.deadline < ReceiptFetchTimeout-time.Second {
			t.Fatalf("the fetch ran with deadline %v (set %v), want about %v", f.deadline, f.hadLimit, ReceiptFetchTimeout)
		}
	})

	t.Run("a failure is reported, never an empty receipt", func(t *testing.T) {
		cause := errors.New("connection refused")
		_, err := ReceiptLookup(&fetcherProvider{err: cause})(context.Background(), "cs_1")
		if !errors.Is(err, ErrReceiptUnavailable) {
			t.Fatalf("err = %v, want ErrReceiptUnavailable", err)
		}
	})

	t.Run("Stripe failing", func(t *testing.T) {
		// Stripe answering 503 and asking not to retry: one request, and
		// the error comes back.
		var calls atomic.Int64
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Stripe-Should-Retry", "false")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"type":"api_error","message":"unavailable"}}`))
		}))
		defer api.Close()
		s := newTestStripe(t, api.URL, api.Client())
		if _, err := ReceiptLookup(s)(context.Background(), testSessionID); !errors.Is(err, ErrReceiptUnavailable) || calls.Load() != 1 {
			t.Fatalf("err = %v after %d calls, want ErrReceiptUnavailable after 1", err, calls.Load())
		}
	})
}
